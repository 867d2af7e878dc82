"""Compiling signatures into cached artifacts: `compile_signature()` (synchronous) and `CompilePool` (worker
processes).

iree-compile always runs as a child process: a compiler crash (it happens, e.g. with some substitution flags)
is then a CompileError, never the death of the caller, every compile gets its own flags, and a timeout or a
cancel kills it. The pool's workers are spawned processes that each lead their own process group: they do the
export (torch.export holds the GIL ~150 ms the first time, which must never happen on a UI thread) and run
iree-compile in a process group of its own (it starts a linker child), so a timeout kills compiler and linker;
cancelling a running job kills the worker with every process under it and starts a new worker.

Workers and compilers stay in the caller's SESSION (process groups, not setsid): with the kernel's autogroup
scheduling (on by default in most distributions) every session is its own scheduling group with an equal share
of the CPU, where the compilers' nice +5 would mean nothing next to the dashboard's UI thread.
"""
from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import multiprocessing
import multiprocessing.connection
import os
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..child import redirect_output_if_asked
from ..errors import CompileError
from ..ops.base import OpSignature
from ..results import CompileInfo
from ..targets import Target, parse_target, per_op_default_flags
from ..variants import BASELINE, Variant
from . import cache as cache_mod
from .cache import CONFIGS, COMMAND, VMFB, KernelCache

DEFAULT_TIMEOUT_S = 600.0


COMPILE_NICENESS = 5


class CompileCancelled(CompileError):
    """The job was cancelled (CompilePool.cancel_all / shutdown) before it finished."""


@dataclass
class Artifact:
    """A compiled kernel in the cache and how it came to be."""

    func_name: str
    target: Target
    variant: Variant
    vmfb_path: str
    dir: str
    key: str
    command: list[str]              # exact iree-compile command line (as in compile_command.sh)
    compile_seconds: float          # export + compile wall time of THIS call; 0.0 on a cache hit
    cache_hit: bool
    compiler_version: str
    num_dispatches: int
    configs_dir: str                # dumped executable configurations (one .mlir per dispatch)
    mlir_path: str
    flags: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)  # the entry's meta.json

    def to_compile_info(self) -> CompileInfo:
        return CompileInfo(seconds=self.compile_seconds, cache_hit=self.cache_hit, command=list(self.command),
                           artifact=self.vmfb_path, key=self.key, compiler_version=self.compiler_version,
                           num_dispatches=self.num_dispatches)


# ---- synchronous compile ---------------------------------------------------------------------------------

def as_target(target: Target | str) -> Target:
    return target if isinstance(target, Target) else parse_target(target)


def compile_flags(sig: OpSignature, target: Target, variant: Variant = BASELINE,
                  extra_flags: Sequence[str] = ()) -> list[str]:
    """Every iree-compile flag that shapes the artifact, in order: target, per-op-class defaults, variant,
    extra. Later flags win, so a variant can override a default (e.g. `--iree-opt-data-tiling=false`)."""
    return (["--iree-input-type=torch"] + target.compile_flags() + per_op_default_flags(sig, target)
            + variant.compile_flags() + list(extra_flags))


def lookup_cached(sig: OpSignature, target: Target | str, variant: Variant = BASELINE, *,
                  cache: KernelCache | None = None, extra_flags: Sequence[str] = ()) -> Artifact | None:
    """The cached artifact for this kernel, found without exporting (a few file reads), or None."""
    target = as_target(target)
    cache = cache or cache_mod.default_cache()
    flags = compile_flags(sig, target, variant, extra_flags)
    ikey = cache.index_key(sig, flags, target.identity(), variant.key_material())
    found = cache.index_lookup(ikey)
    if found is None:
        return None
    meta = cache.load(*found)
    return None if meta is None else _artifact(cache, meta, target, variant, cache_hit=True, seconds=0.0)


def compile_signature(sig: OpSignature, target: Target | str = "cpu", variant: Variant = BASELINE, *,
                      cache: KernelCache | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                      extra_flags: Sequence[str] = ()) -> Artifact:
    """Export and compile `sig` for `target` with `variant`, through the cache. Raises CompileError when export
    or iree-compile fails, crashes or exceeds `timeout_s` (stderr and the command line are kept)."""
    target = as_target(target)
    variant = variant or BASELINE
    cache = cache or cache_mod.default_cache()
    flags = compile_flags(sig, target, variant, extra_flags)
    identity, vkey = target.identity(), variant.key_material()
    ikey = cache.index_key(sig, flags, identity, vkey)
    found = cache.index_lookup(ikey)
    if found is not None:
        meta = cache.load(*found)
        if meta is not None:
            return _artifact(cache, meta, target, variant, cache_hit=True, seconds=0.0)

    from .export import export_mlir  # imports iree.compiler (~70 ms): only when a compile may be needed

    t0 = time.perf_counter()
    mlir = export_mlir(sig)
    export_s = time.perf_counter() - t0
    func = sig.func_name
    key = cache.key_for(mlir, flags, identity, vkey)
    hit = True
    meta = cache.load(func, key)
    if meta is None:
        with cache.lock(func, key):
            meta = cache.load(func, key)  # another process may have built it while we waited
            if meta is None:
                hit = False
                mlir_path = cache.write_mlir(func, mlir)
                meta = _build(cache, sig, target, variant, flags, key, mlir_path, timeout_s,
                              export_s=export_s, identity=identity, variant_key=vkey)
    cache.index_record(ikey, func, key)
    seconds = 0.0 if hit else time.perf_counter() - t0
    return _artifact(cache, meta, target, variant, cache_hit=hit, seconds=seconds)


#: How iree-compile runs, not what it builds (measured byte-identical vmfbs for cpu, gfx942 and sm_80): MLIR's
#: thread pool costs more than it gives on these one-op modules. 15 sample kernels one at a time: 5.9 s instead of
#: 6.8 s wall (and 5.9 s of CPU instead of 7.5 s); two at a time: 3.2 s instead of 3.5 s. Kept out of the cache key.
RUN_FLAGS = ("--mlir-disable-threading",)


def run_flags(flags: Sequence[str]) -> list[str]:
    """RUN_FLAGS not already among `flags` (a flag given twice is an error for iree-compile)."""
    given = {f.split("=", 1)[0] for f in flags}
    return [f for f in RUN_FLAGS if f.split("=", 1)[0] not in given]


def _build(cache: KernelCache, sig: OpSignature, target: Target, variant: Variant, flags: list[str], key: str,
           mlir_path: Path, timeout_s: float, *, export_s: float, identity: str, variant_key: str) -> dict:
    func = sig.func_name
    exe = cache_mod.iree_compile_path()
    final = cache.entry_dir(func, key)
    staging = cache.staging_dir(func, key)

    # The configurations are dumped straight to the entry's final configs/ folder: IREE records the dump path in
    # the vmfb, so only then does compile_command.sh (final paths) rebuild a byte-identical kernel. The vmfb is
    # written to the staging folder, and the folder becomes visible as a valid entry only at the final rename
    # (readers check meta.json; writers hold the per-key lock).
    cache.discard(func, key)
    cmd = [exe, str(mlir_path), *flags, *run_flags(flags),
           f"--iree-hal-dump-executable-configurations-to={final / CONFIGS}", "-o"]
    shown = cmd + [str(final / VMFB)]
    try:
        seconds = _run_compiler(cmd + [str(staging / VMFB)], shown, func, timeout_s)
        if not (staging / VMFB).is_file() or (staging / VMFB).stat().st_size == 0:
            raise CompileError(f"{func}: iree-compile exited 0 but wrote no kernel", command=shown)
        if (final / CONFIGS).is_dir():
            os.rename(final / CONFIGS, staging / CONFIGS)
        else:
            (staging / CONFIGS).mkdir()
        cache.discard(func, key)
        script = "#!/bin/sh\n# rebuilds kernel.vmfb of this cache entry\nexec " + shlex.join(shown) + "\n"
        (staging / COMMAND).write_text(script)
        (staging / COMMAND).chmod(0o755)
        configs = sorted(p.name for p in (staging / CONFIGS).iterdir())
        meta = {
            "signature": repr(sig), "op": sig.op, "mode": sig.mode, "dtype": sig.dtype_name,
            "target": target.name, "target_identity": identity, "variant": variant.describe(),
            "variant_key": variant_key, "flags": flags, "command": shown,
            "compiler_version": cache.compiler_version, "compile_seconds": round(seconds, 4),
            "export_seconds": round(export_s, 4), "num_dispatches": len(configs), "configs": configs,
            "mlir_sha256": cache_mod.file_sha256(mlir_path), "created_at": time.time(),
        }
        return cache.commit(staging, func, key, meta)
    except BaseException:
        cache.discard(func, key)  # the half-dumped configs of a failed compile
        raise
    finally:
        if staging.exists():
            import shutil

            shutil.rmtree(staging, ignore_errors=True)


#: A compile whose CPU time does not move for this long is deadlocked, not slow (a real compile burns CPU all
#: the time). Seen once with iree-compile 3.13: threads parked on a futex at 0% CPU until the 600 s timeout; the
#: same command then compiled in 0.6 s. Such a compile is killed and retried once.
STALL_S = 60.0


class _Stalled(Exception):
    def __init__(self, stderr: str):
        super().__init__("stalled")
        self.stderr = stderr


def _run_compiler(cmd: list[str], shown: list[str], func: str, timeout_s: float, *,
                  stall_s: float = STALL_S, retries: int = 1) -> float:
    """Run iree-compile in its own process group; kill the whole group on timeout. A run that makes no CPU
    progress for `stall_s` is killed and retried (`retries` times). Returns wall seconds of the successful run."""
    for attempt in range(retries + 1):
        try:
            return _run_compiler_once(cmd, shown, func, timeout_s, stall_s)
        except _Stalled as e:
            if attempt == retries:
                raise CompileError(
                    f"{func}: iree-compile made no progress for {stall_s:g} s (deadlocked) and was killed "
                    f"{retries + 1} times", stderr=e.stderr, command=shown) from None
    raise AssertionError("unreachable")


def _run_compiler_once(cmd: list[str], shown: list[str], func: str, timeout_s: float, stall_s: float) -> float:
    t0 = time.perf_counter()
    deadline = time.monotonic() + timeout_s
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, process_group=0)
    last_cpu, last_change = None, time.monotonic()
    try:
        while True:
            now = time.monotonic()
            try:
                # communicate() may be retried after a timeout without losing output
                out, err = proc.communicate(timeout=max(0.01, min(2.0, deadline - now)))
                break
            except subprocess.TimeoutExpired:
                now = time.monotonic()
                if now >= deadline:
                    _kill_group(proc.pid)
                    out, err = proc.communicate()
                    raise CompileError(f"{func}: iree-compile timed out after {timeout_s:g} s", stderr=err or "",
                                       command=shown) from None
                cpu = _cpu_ticks(proc.pid)
                if cpu is None or cpu != last_cpu:
                    last_cpu, last_change = cpu, now
                elif now - last_change >= stall_s:
                    _kill_group(proc.pid)
                    out, err = proc.communicate()
                    raise _Stalled(err or "") from None
    except (CompileError, _Stalled):
        raise
    except BaseException:
        _kill_group(proc.pid)
        proc.wait()
        raise
    if proc.returncode < 0:
        sig = signal.Signals(-proc.returncode).name if -proc.returncode in signal.valid_signals() else proc.returncode
        raise CompileError(f"{func}: iree-compile crashed ({sig})", stderr=(err or "") + (out or ""), command=shown)
    if proc.returncode != 0:
        raise CompileError(f"{func}: iree-compile failed: {_first_error(err or out)}", stderr=err or out or "",
                           command=shown)
    return time.perf_counter() - t0


def _proc_stat(pid: int | str) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (field 3, the state, first), or None where /proc
    cannot tell (gone, not Linux). The name is cut at its LAST ')': it may itself contain spaces and ')'."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _cpu_ticks(pid: int) -> int | None:
    """user + system CPU ticks of a process (all its threads), or None where /proc cannot tell."""
    fields = _proc_stat(pid)
    if not fields or len(fields) < 13 or not (fields[11].isdigit() and fields[12].isdigit()):
        return None
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of the whole line)


def _first_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if "error:" in ln:
            return ln[ln.index("error:") + 6:].strip()[:300]
    return (lines[0] if lines else "no output")[:300]


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _descendants(pid: int) -> list[int]:
    """Every live process under `pid` (from /proc on Linux; empty where there is none)."""
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        fields = _proc_stat(name)
        if fields and len(fields) > 1 and fields[1].isdigit():  # ppid: field 4 of the whole line
            children.setdefault(int(fields[1]), []).append(int(name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _kill_tree(pid: int) -> None:
    """SIGKILL `pid`, everything under it and their process groups (a compiler's linker child included).
    The caller's own group is never signalled: a worker killed before it left it is still in it."""
    procs = [pid, *_descendants(pid)]
    groups = set()
    for p in procs:
        with contextlib.suppress(OSError):
            groups.add(os.getpgid(p))
    groups.discard(os.getpgrp())
    for g in groups:
        _kill_group(g)
    for p in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, signal.SIGKILL)


def _artifact(cache: KernelCache, meta: dict, target: Target, variant: Variant, *, cache_hit: bool,
              seconds: float) -> Artifact:
    func, key = meta["func_name"], meta["key"]
    d = cache.entry_dir(func, key)
    return Artifact(func_name=func, target=target, variant=variant, vmfb_path=str(d / VMFB), dir=str(d), key=key,
                    command=list(meta["command"]), compile_seconds=seconds, cache_hit=cache_hit,
                    compiler_version=meta["compiler_version"], num_dispatches=int(meta["num_dispatches"]),
                    configs_dir=str(d / CONFIGS), mlir_path=str(cache.mlir_path(func)), flags=list(meta["flags"]),
                    meta=meta)


# ---- the pool ------------------------------------------------------------------------------------------------

@dataclass
class _Job:
    sig: OpSignature
    target: Target
    variant: Variant
    extra_flags: tuple[str, ...]
    future: concurrent.futures.Future
    on_start: Callable[[], None] | None = None
    started: float = 0.0


class _Worker:
    """One spawned process leading its own process group, talking over a private pipe."""

    def __init__(self, ctx: Any, cache: KernelCache, timeout_s: float):
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=_worker_main, args=(child, cache, timeout_s), daemon=True,
                                name="boo-compile-worker")
        self.proc.start()
        child.close()
        self.job: _Job | None = None

    def kill(self) -> None:
        # exitcode None: still running, or dead but not reaped, so the pid is still ours (a reaped pid may be
        # reused by an unrelated process)
        if self.proc.pid and self.proc.exitcode is None:
            _kill_tree(self.proc.pid)  # the worker, its iree-compile and the compiler's linker
        self.proc.join(timeout=5)
        with contextlib.suppress(OSError):
            self.conn.close()


def _worker_main(conn: multiprocessing.connection.Connection, cache: KernelCache, timeout_s: float) -> None:
    redirect_output_if_asked()
    with contextlib.suppress(OSError):  # (if refused, a cancel still kills us: _kill_tree signals pids too)
        os.setpgid(0, 0)  # own process group, same session (see the module docstring)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    # a background group writing to a terminal set to `stty tostop` would be stopped mid-compile
    signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        # Compiles are throughput work: the dashboard's UI thread (and, on GPU targets, the benchmark worker)
        # must win the CPU when they compete. The compiler children inherit this.
        os.nice(COMPILE_NICENESS)
    with contextlib.suppress(Exception):  # pay the import cost (~1-2 s) before the first job arrives
        import torch.export  # noqa: F401
        from iree.compiler.extras import fx_importer  # noqa: F401
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        sig, target, variant, extra = msg
        try:
            art = compile_signature(sig, target, variant, cache=cache, timeout_s=timeout_s, extra_flags=extra)
            reply: tuple = ("ok", art)
        except CompileError as e:
            reply = ("err", str(e), e.stderr, e.command)
        except Exception as e:  # noqa: BLE001 - any failure is this job's failure, not the worker's
            reply = ("err", f"{sig.func_name}: {type(e).__name__}: {e}", "", [])
        try:
            conn.send(reply)
        except (OSError, ValueError):
            return


class CompilePool:
    """Compiles many kernels at once in worker processes (default: one per core), through a shared cache.

    `submit()` returns a Future[Artifact] (its exception is a CompileError); cached kernels resolve without
    touching a worker. Workers start lazily (a run whose kernels are all cached never spawns one, and nothing
    imports torch beside a CPU measurement), or all at once with `prestart=True` (hides the ~1-2 s worker
    start-up when compiles are certain). A job that exceeds `timeout_s` fails; `cancel_all()` fails every
    queued and running job with CompileCancelled and kills running compilers.
    """

    def __init__(self, workers: int | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                 cache: KernelCache | None = None, *, prestart: bool = False):
        self.max_workers = max(1, workers or os.cpu_count() or 1)
        self.timeout_s = timeout_s
        self.cache = cache or cache_mod.default_cache()
        self._ctx = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._pending: list[_Job] = []
        self._workers: list[_Worker] = []
        self._closed = False
        self._dispatching: _Job | None = None
        self._wake_r, self._wake_w = multiprocessing.Pipe(duplex=False)
        self._thread = threading.Thread(target=self._loop, name="boo-compile-pool", daemon=True)
        self._thread.start()
        if prestart:  # start (and warm) every worker now rather than at the first cache miss
            with self._lock:
                self._workers = [_Worker(self._ctx, self.cache, self.timeout_s) for _ in range(self.max_workers)]
        # at interpreter exit multiprocessing only SIGTERMs the workers; their iree-compile children would live
        # on, so kill each worker's whole process group
        atexit.register(self._kill_workers)

    # ---- public API ----------------------------------------------------------------------------------
    def submit(self, sig: OpSignature, target: Target | str = "cpu", variant: Variant = BASELINE, *,
               extra_flags: Sequence[str] = (), on_start: Callable[[], None] | None = None
               ) -> concurrent.futures.Future:
        """Queue one compile. `on_start` (optional) is called from the pool's thread when a worker takes it."""
        fut: concurrent.futures.Future = concurrent.futures.Future()
        job = _Job(sig, as_target(target), variant or BASELINE, tuple(extra_flags), fut, on_start)
        with self._lock:
            if self._closed:
                raise RuntimeError("CompilePool is shut down")
            self._pending.append(job)
        self._wake()
        return fut

    def cancel_all(self) -> None:
        """Fail every queued and running job with CompileCancelled; running compilers are killed."""
        with self._lock:
            pending, self._pending = self._pending, []
            if self._dispatching is not None:
                pending.append(self._dispatching)
            running = [w for w in self._workers if w.job is not None]
            for w in running:
                self._workers.remove(w)
        for job in pending:
            if not job.future.cancel():  # already running (being dispatched)
                _fail(job, CompileCancelled(f"{job.sig.func_name}: compile cancelled"))
        for w in running:
            job, w.job = w.job, None
            w.kill()
            if job is not None:
                self._sweep(job)
                _fail(job, CompileCancelled(f"{job.sig.func_name}: compile cancelled"))
        self._wake()

    def shutdown(self, wait: bool = True, *, cancel: bool = False) -> None:
        """Stop accepting jobs; with `cancel`, abandon queued/running ones, else (wait=True) finish them first."""
        if cancel:
            self.cancel_all()
        with self._lock:
            self._closed = True
        self._wake()
        if wait:
            self._thread.join()
        else:
            self.cancel_all()
        atexit.unregister(self._kill_workers)

    def _kill_workers(self) -> None:
        for w in list(self._workers):
            if w.proc.pid and w.proc.is_alive():
                _kill_tree(w.proc.pid)

    def __enter__(self) -> "CompilePool":
        return self

    def __exit__(self, exc_type, *_: Any) -> None:
        self.shutdown(wait=exc_type is None, cancel=exc_type is not None)

    # ---- the dispatcher thread -----------------------------------------------------------------------
    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send_bytes(b"x")

    def _loop(self) -> None:
        try:
            while True:
                self._dispatch()
                with self._lock:
                    busy = [w for w in self._workers if w.job is not None]
                    if self._closed and not busy and not self._pending:
                        break
                ready = multiprocessing.connection.wait([self._wake_r] + [w.conn for w in busy], timeout=1.0)
                for conn in ready:
                    if conn is self._wake_r:
                        with contextlib.suppress(EOFError, OSError):
                            while self._wake_r.poll():
                                self._wake_r.recv_bytes()
                    else:
                        self._collect(conn)
                self._watchdog()
        finally:
            with self._lock:
                workers, self._workers = self._workers, []
            for w in workers:  # all idle here: nothing to lose, and a torch process can take seconds to exit
                w.kill()

    def _dispatch(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    return
                idle = next((w for w in self._workers if w.job is None), None)
                if idle is None and len(self._workers) >= self.max_workers:
                    return
                job = self._pending.pop(0)
                self._dispatching = job  # visible to cancel_all until a worker holds it
            try:
                self._dispatch_one(job, idle)
            finally:
                with self._lock:
                    self._dispatching = None

    def _dispatch_one(self, job: _Job, idle: "_Worker | None") -> None:
        if not job.future.set_running_or_notify_cancel() or self._resolve_from_cache(job):
            return
        if idle is None:
            try:
                idle = _Worker(self._ctx, self.cache, self.timeout_s)
            except Exception as e:  # noqa: BLE001
                _fail(job, CompileError(f"{job.sig.func_name}: cannot start a compile worker: {e}"))
                return
            with self._lock:
                self._workers.append(idle)
        with self._lock:
            if job.future.done():  # cancelled while we were starting the worker
                return
            idle.job = job
            job.started = time.monotonic()
        try:
            idle.conn.send((job.sig, job.target, job.variant, job.extra_flags))
        except (OSError, ValueError) as e:
            idle.job = None
            _fail(job, CompileError(f"{job.sig.func_name}: compile worker unavailable: {e}"))
            self._replace(idle)
            return
        if job.on_start:
            with contextlib.suppress(Exception):
                job.on_start()

    def _resolve_from_cache(self, job: _Job) -> bool:
        try:
            art = lookup_cached(job.sig, job.target, job.variant, cache=self.cache, extra_flags=job.extra_flags)
        except Exception as e:  # noqa: BLE001 - e.g. a spec file vanished: the job fails with that reason
            _fail(job, e if isinstance(e, Exception) else CompileError(str(e)))
            return True
        if art is None:
            return False
        _resolve(job, art)
        return True

    def _collect(self, conn: Any) -> None:
        w = next((w for w in self._workers if w.conn is conn), None)
        if w is None or w.job is None:
            return
        job = w.job
        try:
            reply = conn.recv()
        except (EOFError, OSError):
            code = w.proc.exitcode
            w.job = None
            self._replace(w)
            self._sweep(job)
            _fail(job, CompileError(f"{job.sig.func_name}: compile worker died (exit {code})"))
            return
        w.job = None
        if reply[0] == "ok":
            _resolve(job, reply[1])
        else:
            _fail(job, CompileError(reply[1], stderr=reply[2], command=reply[3]))

    def _watchdog(self) -> None:
        """Safety net above the per-compile timeout (which the worker enforces itself): an export that hangs."""
        limit = self.timeout_s * 1.5 + 60
        now = time.monotonic()
        for w in list(self._workers):
            if w.job is not None and now - w.job.started > limit:
                job, w.job = w.job, None
                self._replace(w)
                self._sweep(job)
                _fail(job, CompileError(f"{job.sig.func_name}: compile job exceeded {limit:g} s and was killed"))

    def _sweep(self, job: _Job) -> None:
        """A worker killed mid-job leaves its staging folder behind: remove it (the worker is dead by now)."""
        with contextlib.suppress(Exception):
            self.cache.sweep_orphans(job.sig.func_name)

    def _replace(self, w: _Worker) -> None:
        with self._lock:
            if w in self._workers:
                self._workers.remove(w)
        w.kill()


def _resolve(job: _Job, art: Artifact) -> None:
    with contextlib.suppress(concurrent.futures.InvalidStateError):
        job.future.set_result(art)


def _fail(job: _Job, exc: BaseException) -> None:
    if not job.future.done():
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            job.future.set_exception(exc)
