"""`RayCompilePool`: the local compile pool's interface (`submit` -> Future[Artifact], `cancel_all`, `shutdown`,
`kill_now`), with each compile a Ray task on any node.

A finished task's entry lands in this host's kernel cache under the key the node computed (the same key a
local compile computes: the cache key is unchanged), its paths rewritten from the node's cache folder to ours,
so the stored reproducer command runs here. A node sharing our cache folder (same host, shared filesystem)
sends no files: the entry it wrote is already the one we read. A node whose IREE differs from ours is refused
by name: its kernels would be keyed and built by another compiler.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..compile.artifact import Artifact, artifact_from_meta
from ..compile.build import DEFAULT_TIMEOUT_S, kernel_key_material
from ..compile.cache import KernelCache, adopt
from ..compile.entry import COMMAND
from ..compile.flags import as_target, key_flags
from ..compile.messages import Failed
from ..compile.storage import storing
from ..compile.trust import inside_entry
from ..errors import ClusterLost, CompileError, one_line
from ..ops.base import OpSignature
from ..targets import Target
from ..variants import BASELINE, Variant
from .connect import Cluster
from .remote import CompileOrder, CompileReply, Shipped, compile_remote, variant_files

if TYPE_CHECKING:
    from ray import ObjectRef

#: how long the collecting thread waits on Ray before it looks at cancels and the cluster again
WAIT_S = 0.5


class RayCompilePool:
    def __init__(self, cluster: Cluster, cache: KernelCache, timeout_s: float = DEFAULT_TIMEOUT_S, *,
                 node_cache: str | None = None) -> None:
        """`node_cache`: the folder the nodes compile into (default: ours, where a node can write it); one our
        host does not share makes every entry travel through the object store."""
        self.cluster = cluster
        self.cache = cache
        self._node_cache = node_cache or str(cache.root)
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        #: a compile task's reply -> (its future, the sig, target, variant and extra flags it compiles)
        self._pending: dict[ObjectRef[CompileReply], tuple[concurrent.futures.Future[Artifact], OpSignature, Target,
                                                           Variant, tuple[str, ...]]] = {}
        self._closed = False
        #: this host's share of the work, for benchmarks/bench_ray.py: entries landed and the seconds it took
        self.landed = 0
        self.land_s = 0.0
        # a node that sees this file in its cache folder shares ours: it sends no files
        self._token = f".ray-share-{uuid.uuid4().hex}"
        with contextlib.suppress(OSError):
            (Path(cache.root) / self._token).write_text("")
        self._thread = threading.Thread(target=self._collect, name="boo-ray-compile", daemon=True)
        self._thread.start()

    def submit(self, sig: OpSignature, target: Target | str = "cpu", variant: Variant = BASELINE, *,
               extra_flags: Sequence[str] = (), on_start: Callable[[], None] | None = None
               ) -> concurrent.futures.Future[Artifact]:
        """Queue one compile on the cluster. `on_start` is called at once: Ray does not say when a task starts."""
        target, variant = as_target(target), variant or BASELINE
        fut: concurrent.futures.Future[Artifact] = concurrent.futures.Future()
        if self._closed:
            raise RuntimeError("RayCompilePool is shut down")
        self.cluster.check()
        try:
            files = variant_files(variant)
        except OSError as e:   # a spec removed since the run started: this job's failure
            fut.set_exception(CompileError(f"{sig.func_name}: variant {variant.name!r}: {e}"))
            return fut
        order = CompileOrder(sig=sig, target=target, variant=variant, extra_flags=tuple(extra_flags),
                             cache_root=self._node_cache, share_token=self._token, timeout_s=self.timeout_s,
                             files=files)
        ref = compile_remote().remote(order)
        with self._lock:
            if self._closed:
                raise RuntimeError("RayCompilePool is shut down")
            self._pending[ref] = (fut, sig, target, variant, tuple(extra_flags))
        if on_start is not None:
            with contextlib.suppress(Exception):
                on_start()
        return fut

    def _collect(self) -> None:
        import ray

        while True:
            with self._lock:
                if self._closed:
                    return
                refs = list(self._pending)
            if not refs:
                threading.Event().wait(0.05)
                continue
            for ref in refs:   # what a cancel dropped is answered already
                with self._lock:
                    entry = self._pending.get(ref)
                if entry is not None and entry[0].cancelled():
                    self._drop(ref)
            try:
                done, _ = ray.wait(refs, num_returns=1, timeout=WAIT_S)
            except Exception:  # noqa: BLE001 - the head went away: every pending compile fails with it
                done = []
                threading.Event().wait(WAIT_S)
            if not done:
                if not self.cluster.alive():
                    self._fail_all(ClusterLost(f"the Ray cluster at {self.cluster.address} went away"))
                continue
            for ref in done:
                self._finish(ref)

    def _finish(self, ref: ObjectRef[CompileReply]) -> None:
        import ray

        with self._lock:
            entry = self._pending.pop(ref, None)
        if entry is None:
            return
        fut, sig, target, variant, extra = entry
        t0 = time.perf_counter()
        try:
            reply = ray.get(ref)
            if isinstance(reply, Failed):
                raise reply.error()
            assert isinstance(reply, Shipped), type(reply)
            art = self._land(reply, sig, target, variant, extra)
        except BaseException as e:  # noqa: BLE001 - the job's failure, never the collector's death
            if not isinstance(e, (CompileError, ClusterLost)):
                e = ClusterLost(f"the Ray cluster at {self.cluster.address} went away") \
                    if not self.cluster.alive() else CompileError(f"{sig.func_name}: compile task failed on the "
                                                                  f"cluster: {one_line(e)}")
            with contextlib.suppress(concurrent.futures.InvalidStateError):
                fut.set_exception(e)
            return
        self.landed += 1
        self.land_s += time.perf_counter() - t0
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            fut.set_result(art)

    def _land(self, shipped: Shipped, sig: OpSignature, target: Target, variant: Variant,
              extra: tuple[str, ...]) -> Artifact:
        """The shipped entry in our cache (under its key), as an Artifact of this host."""
        meta = shipped.meta
        func, key = str(meta["func_name"]), str(meta["key"])
        cache = self.cache
        if meta.get("compiler_version") != cache.compiler_version:
            raise CompileError(f"{func}: node {shipped.node} compiled with {meta.get('compiler_version')!r}, "
                               f"this host has {cache.compiler_version!r}: install the same IREE on every node")
        found = cache.load(func, key)
        if found is None and not shipped.files:   # a node sharing our folder: signed with its key, maybe not ours
            found = adopt(cache, func, key, shipped.meta)
        if found is None:
            if not shipped.files:
                raise CompileError(f"{func}: node {shipped.node} wrote the kernel into a cache folder this host "
                                   f"does not see ({shipped.node_root}), or it changed since")
            with storing(cache.root), cache.lock(func, key):
                if cache.load(func, key) is None:
                    self._write_entry(shipped, func, key)
            found = cache.load(func, key)
            if found is None:
                raise CompileError(f"{func}: the kernel shipped by node {shipped.node} does not validate here")
        flags = key_flags(sig, target, variant, extra)
        with contextlib.suppress(OSError):
            vkey = kernel_key_material(sig, target, variant)
            cache.index.record(cache.index_key(sig, flags, target.identity(), vkey), func, key)
        return artifact_from_meta(cache, found, target, variant, cache_hit=shipped.cache_hit,
                                  seconds=shipped.seconds, untrusted=shipped.untrusted)

    def _write_entry(self, shipped: Shipped, func: str, key: str) -> None:
        cache, here, there = self.cache, str(self.cache.root), shipped.node_root
        names = [*shipped.files, *([shipped.mlir_name] if shipped.mlir_text is not None else [])]
        if bad := next((n for n in names if not inside_entry(n)), None):
            # a node names the files it sends: '../x' or '/x' would be written outside the entry
            raise CompileError(f"{func}: node {shipped.node} sent a file named {bad!r}, outside the cache entry")
        if shipped.mlir_text is not None:
            _write(cache.func_dir(func) / shipped.mlir_name, shipped.mlir_text.encode())
        staging = cache.staging_dir(func, key)
        for rel, blob in shipped.files.items():
            if rel == COMMAND:   # the reproducer names the node's folder: ours now
                blob = blob.decode().replace(there, here).encode()
            _write(staging / rel, blob)
        if (staging / COMMAND).exists():
            (staging / COMMAND).chmod(0o755)
        meta = dict(shipped.meta)
        meta["command"] = [part.replace(there, here) for part in meta.get("command", [])]
        cache.commit(staging, func, key, meta)

    def _drop(self, ref: ObjectRef[CompileReply]) -> None:
        """A compile whose future was cancelled: forgotten here, its task told to stop."""
        import ray

        with self._lock:
            self._pending.pop(ref, None)
        with contextlib.suppress(Exception):
            ray.cancel(ref, force=True)

    def _fail_all(self, error: BaseException) -> None:
        with self._lock:
            pending, self._pending = self._pending, {}
        for fut, *_ in pending.values():
            with contextlib.suppress(concurrent.futures.InvalidStateError):
                fut.set_exception(error)

    def cancel_all(self) -> None:
        """Cancel every queued and running compile: their futures are cancelled, their tasks told to stop."""
        import ray

        with self._lock:
            pending, self._pending = self._pending, {}
        for ref, (fut, *_) in pending.items():
            fut.cancel()
            if self.cluster.alive():
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)

    def shutdown(self, wait: bool = True, *, cancel: bool = False) -> None:
        if cancel:
            self.cancel_all()
        with self._lock:
            self._closed = True
        with contextlib.suppress(OSError):
            os.unlink(Path(self.cache.root) / self._token)
        if wait:
            self._thread.join(timeout=5)

    def kill_now(self) -> None:
        """Last resort before exiting: nothing runs in this host's processes; the tasks end with the driver."""


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)

