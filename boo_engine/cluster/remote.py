"""What runs on the cluster's nodes: the compile task and the measuring actor, and their Ray wrappers.

Both reuse what a local run does, in the node's own processes:
- `compile_task` is `compile.build.compile_signature` into the node's kernel cache (the folder this host uses,
  where the node can write it, so nodes sharing a host or a filesystem share the cache), returning what this
  host needs to land the entry in its own cache (`Shipped`); a failure comes back as the local pool's `Failed`;
- `MeasureActor` holds one `bench.worker.BenchWorker` (the crash-isolated benchmark process of a local run) on
  its device, and runs one measurement at a time in a thread, its samples picked up by `poll` as they come.
"""
from __future__ import annotations

import contextlib
import functools
import os
import shutil
import socket
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypedDict

from ..compile.entry import META
from . import node_label

if TYPE_CHECKING:
    from ray._private.worker import RemoteFunction0

    from ..bench.messages import BenchOutcome, BenchSpec
    from ..compile.messages import Failed
    from ..ops.base import OpSignature
    from ..targets import Target
    from ..variants import Variant

#: what one poll waits for new samples before it answers with none
POLL_WAIT_S = 0.25


@dataclass
class CompileOrder:
    """One compile, as a task receives it."""

    sig: OpSignature
    target: Target
    variant: Variant
    extra_flags: tuple[str, ...]
    cache_root: str            # this host's kernel cache: the node uses the same folder where it can
    share_token: str           # a file in that folder: a node that sees it shares this host's cache
    timeout_s: float
    files: dict[str, bytes] = field(default_factory=dict)   # the variant's spec and substituted files, by path


def variant_files(variant: Variant) -> dict[str, bytes]:
    """The files a variant's kernel is built from (tuning specs, substituted dispatches), for nodes that lack
    them: the cache key hashes their content, never their path."""
    paths = (list(variant.tuning_specs) + [path for _, _, path in variant.substitutions]
             + [path for *_, path in variant.kernel_substitutions])
    return {p: Path(p).read_bytes() for p in paths}


def _materialize(variant: Variant, files: dict[str, bytes]) -> Variant:
    """The variant with its files present on this node: at the same path where the node has them or can write
    them there (the flags, and so the key, are then the caller's), else in a folder of this node's."""
    moved: dict[str, str] = {}
    for path, blob in files.items():
        with contextlib.suppress(OSError):
            if Path(path).read_bytes() == blob:
                continue
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_bytes(blob)
        except OSError:
            local = Path(tempfile.mkdtemp(prefix="boo-ray-files-")) / Path(path).name
            local.write_bytes(blob)
            moved[path] = str(local)
    if not moved:
        return variant
    return replace(variant, tuning_specs=tuple(moved.get(p, p) for p in variant.tuning_specs),
                   substitutions=tuple((k, n, moved.get(p, p)) for k, n, p in variant.substitutions),
                   kernel_substitutions=tuple((f, k, n, moved.get(p, p))
                                              for f, k, n, p in variant.kernel_substitutions))


@dataclass
class Shipped:
    """A compiled entry, as a task returns it: its meta, and its files unless the node shares our cache."""

    meta: dict[str, Any]
    node_root: str             # the node's cache root (paths in the meta name it)
    mlir_name: str
    mlir_text: str | None
    seconds: float
    cache_hit: bool
    node: str
    files: dict[str, bytes] = field(default_factory=dict)   # path in the entry folder -> bytes; {}: shared
    untrusted: str = ""        # the untrusted entry the node's compile replaced (Artifact.untrusted)
    nice: int = 0              # the niceness the node compiled at


#: what a compile task answers: where it ran (a no-op order), the failure, or the entry to land
CompileReply: TypeAlias = "str | Failed | Shipped"
#: how a measurement on the actor ended: its outcome, a cancel, or a failure (one line)
RunEnd: TypeAlias = "tuple[Literal['done'], BenchOutcome] | tuple[Literal['cancelled']] | tuple[Literal['failed'], str]"


class ActorInfo(TypedDict, total=False):
    """What a measuring actor says of itself when it starts (`MeasureActor.info`: every key; `RayBenchWorker.
    actor_info` is empty until then)."""

    node: str
    pid: int
    worker_pid: int | None     # its benchmark worker process
    cpu: str                   # hostcpu.host_cpu_identity()
    gpus: list[int] | list[str]   # the GPUs Ray lets it see
    nice: int


class _Run(TypedDict):
    """One measurement on the actor: the samples not yet polled, how it ended (None: running), its cancel."""

    samples: list[float]
    end: RunEnd | None
    cancel: threading.Event


def _node_label() -> str:
    try:
        import ray

        return node_label(socket.gethostname(), ray.get_runtime_context().get_node_id())
    except Exception:  # noqa: BLE001 - outside a Ray worker (tests calling the task directly)
        return socket.gethostname()


def compile_task(order: CompileOrder | None) -> CompileReply:
    """Compile one kernel on this node (None: a no-op that answers where it ran, sent when joining)."""
    if order is None:
        return _node_label()
    from ..compile import turbine
    from ..compile.build import compile_signature
    from ..compile.cache import open_cache
    from ..compile.messages import Failed

    turbine.EXPORT_IN_PROCESS = True   # a Ray task made for compiling: BOO's export runs here
    from ..compile.storage import CacheStoreError
    from ..errors import CompileError

    nice = _compile_niceness()
    try:
        cache = open_cache(order.cache_root)
        variant = _materialize(order.variant, order.files)
        art = compile_signature(order.sig, order.target, variant, cache=cache, timeout_s=order.timeout_s,
                                extra_flags=order.extra_flags)
    except CacheStoreError as e:
        return Failed(str(e), e.stderr, tuple(e.command), cache_root=e.root, cache_reason=e.reason)
    except CompileError as e:
        return Failed(str(e), e.stderr, tuple(e.command))
    except Exception as e:  # noqa: BLE001 - any failure is this job's, said in one line
        return Failed(f"{order.sig.func_name}: {type(e).__name__}: {e}")
    shared = (Path(cache.root) / order.share_token).exists()
    entry = Path(art.dir)
    files: dict[str, bytes] = {}
    if not shared:
        for p in sorted(entry.rglob("*")):
            if p.is_file() and p.name != META:
                files[str(p.relative_to(entry))] = p.read_bytes()
    mlir_path = Path(art.mlir_path)
    mlir_name = mlir_path.name
    mlir_text = None if shared or not mlir_path.is_file() else mlir_path.read_text()
    return Shipped(meta=dict(art.meta), node_root=str(cache.root), mlir_name=mlir_name, mlir_text=mlir_text,
                   seconds=art.compile_seconds, cache_hit=art.cache_hit, node=_node_label(), files=files,
                   untrusted=art.untrusted, nice=nice)


def _compile_niceness() -> int:
    """Ray runs its task workers at its worker_niceness (15), where a compile starves behind anything else the
    node runs at 0 (a ray:// run on a busy 2-core machine waited minutes for a 3 s compile). A compile on a node
    runs at the niceness of a local one (COMPILE_NICENESS), where the node lets us lower it. Returns the
    niceness it runs at."""
    from ..compile.worker import COMPILE_NICENESS

    with contextlib.suppress(OSError):
        if os.getpriority(os.PRIO_PROCESS, 0) > COMPILE_NICENESS:
            os.setpriority(os.PRIO_PROCESS, 0, COMPILE_NICENESS)
    return os.getpriority(os.PRIO_PROCESS, 0)


class MeasureActor:
    """One device of one node: its benchmark worker process, one measurement at a time."""

    def __init__(self, device: str, threads: int) -> None:
        from ..bench.worker import BenchWorker

        # Ray starts its workers niced (its worker_niceness); a measurement must not lose its CPU to anything else
        # of the node's, so the actor (and the benchmark process it spawns) goes back to 0 where it may
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, 0, 0)
        self._nice = os.getpriority(os.PRIO_PROCESS, 0)
        self._worker = BenchWorker(threads=threads, device=device)   # its torch import starts now
        self._cond = threading.Condition()
        self._runs: dict[int, _Run] = {}
        self._next = 0
        self._scratch = tempfile.mkdtemp(prefix="boo-ray-measure-")

    def info(self) -> ActorInfo:
        from ..hostcpu import host_cpu_identity

        gpus: list[int] | list[str] = []
        with contextlib.suppress(Exception):
            import ray

            gpus = ray.get_gpu_ids()   # a new list every call
        return {"node": _node_label(), "pid": os.getpid(), "worker_pid": self._worker.pid,
                "cpu": host_cpu_identity(), "gpus": gpus, "nice": self._nice}

    # ---- kernels ------------------------------------------------------------------------------------------
    def local_copy(self, path: str, size: int, sha256: str) -> str | None:
        """Where this node has the kernel: the same path (a shared cache) or the copy sent earlier; None: send it."""
        from ..compile.cache import file_sha256

        mine = os.path.join(self._scratch, f"{sha256}.vmfb")
        for p in (path, mine):
            with contextlib.suppress(OSError):
                if os.path.getsize(p) == size and (p == mine or file_sha256(Path(p)) == sha256):
                    return p
        return None

    def receive(self, sha256: str, blob: bytes) -> str:
        path = os.path.join(self._scratch, f"{sha256}.vmfb")
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
        return path

    def _local(self, path: str | None) -> str | None:
        """A path of the caller's host (saved outputs), where it can be on this node."""
        if path is None:
            return None
        parent = os.path.dirname(path)
        if os.path.isdir(parent) and os.access(parent, os.W_OK):
            return path
        return os.path.join(self._scratch, os.path.basename(path))

    # ---- one measurement ----------------------------------------------------------------------------------
    def start(self, spec: BenchSpec) -> int:
        spec = replace(spec, save_outputs_to=self._local(spec.save_outputs_to),
                       compare_outputs_with=self._local(spec.compare_outputs_with))
        with self._cond:
            self._next += 1
            rid = self._next
            run: _Run = {"samples": [], "end": None, "cancel": threading.Event()}
            self._runs[rid] = run

        def sink(batch: list[float]) -> None:
            with self._cond:
                run["samples"].extend(batch)
                self._cond.notify_all()

        def measure() -> None:
            from ..bench.worker import BenchCancelled, BenchFailed

            try:
                end: RunEnd = ("done", self._worker.run(spec, on_samples=sink, cancel=run["cancel"]))
            except BenchCancelled:
                end = ("cancelled",)
            except BenchFailed as e:
                end = ("failed", str(e))
            except Exception as e:  # noqa: BLE001 - the job fails, the actor stays
                end = ("failed", f"{type(e).__name__}: {e}")
            with self._cond:
                run["end"] = end
                self._cond.notify_all()

        threading.Thread(target=measure, name=f"boo-ray-measure-{rid}", daemon=True).start()
        return rid

    def poll(self, rid: int, wait_s: float = POLL_WAIT_S) -> tuple[list[float], RunEnd | None]:
        """The samples taken since the last poll, and how the measurement ended (None: still running)."""
        deadline = time.monotonic() + wait_s
        with self._cond:
            run = self._runs[rid]
            while not run["samples"] and run["end"] is None and (left := deadline - time.monotonic()) > 0:
                self._cond.wait(left)
            batch, run["samples"] = run["samples"], []
            end = run["end"]
            if end is not None:
                del self._runs[rid]
            return batch, end

    def cancel(self, rid: int) -> None:
        with self._cond:
            run = self._runs.get(rid)
        if run is not None:
            run["cancel"].set()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._worker.close()
        shutil.rmtree(self._scratch, ignore_errors=True)


# ---- the Ray wrappers ------------------------------------------------------------------------------------------

@functools.cache
def compile_remote() -> RemoteFunction0[CompileReply, CompileOrder | None]:
    """The compile task: 1 CPU; retried once by Ray when its node or worker process dies. Made once per process."""
    import ray

    return ray.remote(num_cpus=1, max_retries=1)(compile_task)


@functools.cache
def actor_class() -> Any:
    """The measuring actor: threaded (a poll and a cancel run beside the measurement), never restarted by Ray
    (a dead actor is a failed result here, and a fresh actor takes the next job). Made once per process.

    Any: Ray 2.60's `ray.remote` overloads take no actor options (max_concurrency), and its ActorClass makes
    handles whose methods it types as Never (measuring.ActorRef)."""
    import ray

    decorate: Any = ray.remote
    return decorate(max_concurrency=4, max_restarts=0)(MeasureActor)


def export_all() -> str:
    """Send the compile task to the cluster now (a no-op run: where it ran), while the head surely answers: a
    first `.remote()` after the head is gone would block for good."""
    import ray

    actor_class()
    return str(ray.get(compile_remote().remote(None), timeout=120))
