"""Benchmark worker: ONE child process per device that runs measurements, so a kernel that crashes or hangs
costs a failed result, never the caller.

Why a process:
- a kernel can segfault (GPU memory faults, miscompiles) or never return; only a process can be killed;
- the measurement must own its CPU and its runtime state: the child imports torch and IREE once, keeps loaded
  modules warm between jobs, and sets process-global runtime flags (IREE's task topology, torch's thread count)
  before anything else runs;
- the caller (a session thread) keeps streaming samples out while the child measures.

Protocol (two one-way pipes, every message tagged with the job's sequence number so late messages of an earlier
job are ignored):
  parent -> child: ("run", seq, BenchSpec) | ("cancel", seq) | ("close",)
  child -> parent: ("ready", pid) | ("samples", seq, [us, ...]) | ("done", seq, BenchOutcome)
                   | ("error", seq, reason) | ("cancelled", seq)

A failure in the job (the kernel raises, a file is missing) is reported by the child, which stays up. A death
(signal, exit) or a hang past the timeout makes the parent kill the child if needed, raise `BenchFailed` and
start a fresh child, so the next `run` works.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import queue
import signal
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Callable

from ..child import redirect_output_if_asked
from ..errors import BooError, one_line
from ..fsutil import atomic_write
from ..results import IREE, TORCH, NumericsInfo
from ..targets import runtime_driver

# How long a started child may take to import torch + IREE and say it is ready.
STARTUP_TIMEOUT_S = 120.0
# After cancel is sent, how long the child gets to stop by itself before it is killed.
CANCEL_GRACE_S = 0.5
# How often the parent wakes up to check cancel / timeout while waiting for the child.
_POLL_S = 0.05


class BenchFailed(BooError):
    """A measurement failed: the kernel raised, the worker process died, or it hung past its timeout."""


class BenchCancelled(BooError):
    """The measurement was cancelled by the caller (not a failure of the kernel)."""


@dataclass(frozen=True)
class BenchSpec:
    """One measurement to run in the worker. Picklable: it crosses the process boundary."""

    job_id: str
    backend: str                        # "iree" | "torch"
    sig: Any                            # an OpSignature (picklable)
    target_name: str = "cpu"            # "cpu", "hip:gfx942", "cuda:sm_80"
    vmfb_path: str | None = None        # iree backend: the compiled artifact
    driver: str = "local-sync"          # IREE runtime driver; on CPU replaced by local-sync/local-task per threads
    threads: int = 1                    # CPU threads (IREE local-task workers and torch threads)
    iters: int = 100
    min_time_s: float | None = None
    max_time_s: float | None = 60.0
    seed: int = 0
    splat_value: float | None = None
    verify_numerics: bool = False
    save_outputs_to: str | None = None  # torch.save the outputs of one call here (baselines, for variants)
    compare_outputs_with: str | None = None  # numerics vs these saved outputs instead of the float64 reference
    timeout_s: float | None = None      # None: default_timeout_s(self)
    function: str = "main"              # exported function of the vmfb
    warmup_s: float = 0.1


@dataclass
class BenchOutcome:
    samples_us: list[float]
    block_k: int
    warmup_calls: int
    wall_s: float
    host_load: float | None
    numerics: NumericsInfo | None = None
    outputs_path: str | None = None
    driver: str | None = None           # the IREE driver actually used (None for torch)
    threads: int = 1
    truncated: bool = False             # max_time_s stopped sampling early
    overhead_fraction: float | None = None  # estimated harness cost per call / call time


def default_timeout_s(spec: BenchSpec) -> float:
    """Generous: a minute for loading, warm-up and numerics, plus twice the measurement bound.

    Without max_time_s the measurement has no bound of its own; allow the minimum time plus one second per
    requested sample (kernels slower than that are unusual enough to need an explicit timeout).
    """
    if spec.max_time_s is not None:
        return 60.0 + 2.0 * spec.max_time_s
    return 60.0 + 2.0 * (spec.min_time_s or 0.0) + 1.0 * spec.iters


def resolve_driver(spec: BenchSpec) -> str:
    """CPU: local-sync for one thread (the most stable, and what the reproducer uses), local-task otherwise."""
    return runtime_driver(spec.driver, spec.threads)


# =========================================================================================================
# Parent side
# =========================================================================================================

class BenchWorker:
    """A benchmark child process for one device, replaced transparently after a crash or hang.

    `run` is blocking and meant for one session thread at a time (a lock serialises callers). The child's
    thread count is fixed when it starts (IREE's task topology can only be set once per process), so a spec
    asking for another thread count restarts the child.
    """

    def __init__(self, target_name: str = "cpu", *, threads: int = 1, start: bool = True) -> None:
        self.target_name = target_name   # the device this worker measures on (specs carry it too)
        self._ctx = mp.get_context("spawn")
        self._lock = threading.Lock()
        self._threads = threads
        self._proc: mp.process.BaseProcess | None = None
        self._to_child: Connection | None = None
        self._from_child: Connection | None = None
        self._ready = False
        self._seq = 0
        if start:
            self._start()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # ---- public -------------------------------------------------------------------------------------
    def run(
        self,
        spec: BenchSpec,
        on_samples: Callable[[list[float]], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> BenchOutcome:
        """Measure `spec` in the child. Samples reach `on_samples` in this thread as they arrive.

        Raises BenchFailed (kernel raised, worker died, timeout) or BenchCancelled.
        """
        _check_spec(spec)
        with self._lock:
            if self._proc is None or spec.threads != self._threads or not self._proc.is_alive():
                self._replace(threads=spec.threads)
            try:
                self._wait_ready(cancel)
                return self._run_job(spec, on_samples, cancel)
            except (BenchFailed, BenchCancelled):
                raise
            except BaseException:
                # The caller's callback raised or we were interrupted mid-job: the child's state is unknown.
                self._replace(threads=self._threads)
                raise

    def close(self) -> None:
        """Stop the child (politely, then by force)."""
        with self._lock:
            self._stop()

    def __enter__(self) -> "BenchWorker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- process management -------------------------------------------------------------------------
    def _start(self) -> None:
        to_child_r, to_child_w = self._ctx.Pipe(duplex=False)
        from_child_r, from_child_w = self._ctx.Pipe(duplex=False)
        proc = self._ctx.Process(
            target=_child_main, args=(to_child_r, from_child_w, self._threads),
            name="boo-bench-worker", daemon=True,
        )
        proc.start()
        # Keep only our ends; closing the child's ends here lets EOF signal the child's death.
        to_child_r.close()
        from_child_w.close()
        self._proc, self._to_child, self._from_child, self._ready = proc, to_child_w, from_child_r, False

    def _stop(self, *, force: bool = False) -> None:
        proc = self._proc
        if proc is None:
            return
        if not force and proc.is_alive():
            try:
                self._to_child.send(("close",))
            except OSError:
                pass
            proc.join(2.0)
        if proc.is_alive():
            proc.kill()
            proc.join(5.0)
        for conn in (self._to_child, self._from_child):
            try:
                conn.close()
            except OSError:
                pass
        self._proc = self._to_child = self._from_child = None
        self._ready = False

    def _replace(self, *, threads: int) -> None:
        self._stop(force=True)
        self._threads = threads
        self._start()

    def _death_reason(self) -> str:
        proc = self._proc
        proc.join(2.0)
        code = proc.exitcode
        if code is None:
            return "worker stopped responding"
        if code < 0:
            try:
                return f"worker died with {signal.Signals(-code).name}"
            except ValueError:
                return f"worker died with signal {-code}"
        return f"worker exited with status {code}"

    def _wait_ready(self, cancel: threading.Event | None) -> None:
        if self._ready:
            return
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if cancel is not None and cancel.is_set():
                raise BenchCancelled("cancelled")
            msg = self._receive(_POLL_S)
            if msg is _DIED:
                reason = self._death_reason()
                self._replace(threads=self._threads)
                raise BenchFailed(f"{reason} while starting")
            if msg is not None and msg[0] == "ready":
                self._ready = True
                return
            if time.monotonic() > deadline:
                self._replace(threads=self._threads)
                raise BenchFailed(f"worker did not start within {STARTUP_TIMEOUT_S:g} s")

    def _receive(self, timeout: float):
        """The next message, None when none came within `timeout`, _DIED when the child is gone."""
        conn, proc = self._from_child, self._proc
        ready = wait([conn, proc.sentinel], timeout)
        if conn in ready:
            try:
                return conn.recv()
            except (EOFError, OSError):
                return _DIED
        if proc.sentinel in ready:
            # Gone; drain anything it managed to send first.
            if conn.poll(0):
                try:
                    return conn.recv()
                except (EOFError, OSError):
                    return _DIED
            return _DIED
        return None

    # ---- one job --------------------------------------------------------------------------------------
    def _run_job(self, spec, on_samples, cancel) -> BenchOutcome:
        self._seq += 1
        seq = self._seq
        timeout = spec.timeout_s if spec.timeout_s is not None else default_timeout_s(spec)
        self._to_child.send(("run", seq, spec))
        start = time.monotonic()
        cancel_sent: float | None = None
        while True:
            msg = self._receive(_POLL_S)
            if msg is _DIED:
                reason = self._death_reason()
                self._replace(threads=self._threads)
                raise BenchFailed(reason)
            if msg is not None and len(msg) > 1 and msg[1] == seq:
                kind = msg[0]
                if kind == "samples":
                    if on_samples is not None and msg[2]:
                        on_samples(msg[2])
                elif kind == "done":
                    return msg[2]
                elif kind == "error":
                    raise BenchFailed(msg[2])
                elif kind == "cancelled":
                    raise BenchCancelled("cancelled")
            now = time.monotonic()
            if cancel is not None and cancel.is_set() and cancel_sent is None:
                self._to_child.send(("cancel", seq))
                cancel_sent = now
            if cancel_sent is not None and now - cancel_sent > CANCEL_GRACE_S:
                self._replace(threads=self._threads)   # it did not stop in time (a long call): kill it
                raise BenchCancelled("cancelled")
            if now - start > timeout:
                self._replace(threads=self._threads)
                raise BenchFailed(f"timed out after {timeout:g} s")


_DIED = object()


def _check_spec(spec: BenchSpec) -> None:
    if spec.backend not in (IREE, TORCH):
        raise BenchFailed(f"unknown backend {spec.backend!r} (expected 'iree' or 'torch')")
    if spec.backend == IREE and not spec.vmfb_path:
        raise BenchFailed("iree backend needs vmfb_path")
    if spec.backend == IREE and not os.path.isfile(spec.vmfb_path):
        raise BenchFailed(f"no such artifact: {spec.vmfb_path}")
    if spec.iters < 1:
        raise BenchFailed(f"iters must be >= 1, got {spec.iters}")
    if spec.threads < 1:
        raise BenchFailed(f"threads must be >= 1, got {spec.threads}")


# =========================================================================================================
# Child side
# =========================================================================================================

def _child_main(inbox: Connection, outbox: Connection, threads: int) -> None:
    """Entry point of the worker process."""
    redirect_output_if_asked()
    _set_process_threads(threads)
    import torch  # noqa: F401  (imported once, here, so jobs do not pay for it)
    import iree.runtime  # noqa: F401

    jobs: queue.Queue = queue.Queue()
    cancelled: set[int] = set()

    def read() -> None:
        while True:
            try:
                msg = inbox.recv()
            except (EOFError, OSError):
                jobs.put(None)
                return
            if msg[0] == "run":
                jobs.put((msg[1], msg[2]))
            elif msg[0] == "cancel":
                cancelled.add(msg[1])
            elif msg[0] == "close":
                jobs.put(None)
                return

    threading.Thread(target=read, name="boo-bench-inbox", daemon=True).start()
    state = RuntimeCache()
    outbox.send(("ready", os.getpid()))
    while True:
        job = jobs.get()
        if job is None:
            return
        seq, spec = job
        flag = _SeqCancel(seq, cancelled)
        try:
            outcome = _run_spec(spec, state, lambda batch: outbox.send(("samples", seq, batch)), flag)
        except _Cancelled:
            outbox.send(("cancelled", seq))
        except Exception as e:  # noqa: BLE001 - any failure of the job is a failed result, one line
            outbox.send(("error", seq, one_line(e)))
        else:
            outbox.send(("done", seq, outcome))
        cancelled.discard(seq)


def _set_process_threads(threads: int) -> None:
    """Process-global thread settings, before the first local-task device or torch op exists."""
    import iree.runtime as rt
    import torch

    if threads > 1:
        rt.flags.parse_flags(f"--task_topology_max_group_count={threads}")
    torch.set_num_threads(threads)


class _SeqCancel:
    def __init__(self, seq: int, cancelled: set[int]) -> None:
        self._seq, self._cancelled = seq, cancelled

    def is_set(self) -> bool:
        return self._seq in self._cancelled


class _Cancelled(Exception):
    pass


class RuntimeCache:
    """Loaded modules the worker keeps warm between jobs, reused while the .vmfb file is unchanged.
    (Devices are cached per process by `boo_engine.runtime.launchable`.)"""

    def __init__(self) -> None:
        self._modules: dict[tuple, Any] = {}

    def module(self, path: str, driver: str, threads: int, function: str):
        from ..runtime.launchable import load_artifact

        st = os.stat(path)
        key = (os.path.realpath(path), st.st_mtime_ns, st.st_size, driver, threads, function)
        module = self._modules.get(key)
        if module is None:
            module = self._modules[key] = load_artifact(path, driver, threads, function=function)
        return module


def _run_spec(spec: BenchSpec, state: RuntimeCache, send: Callable[[list[float]], None], cancel: _SeqCancel):
    from .harness import measure

    import torch

    torch.set_num_threads(spec.threads)
    device = _torch_device(spec.target_name)
    args = spec.sig.get_sample_args(spec.seed, splat_value=spec.splat_value)
    driver = None
    if spec.backend == IREE:
        kernel = IreeCall(state, spec.sig, spec.vmfb_path, resolve_driver(spec), spec.threads, spec.function, args)
        call, sync, outputs, driver = kernel.call, None, kernel.outputs, kernel.driver
    else:
        targs = tuple(a.to(device) for a in args)
        ref = spec.sig.reference

        def call():
            return ref(*targs)

        sync = torch.cuda.synchronize if device != "cpu" else None

        def outputs():
            return _as_tensor_tuple(call())

    try:
        m = measure(call, iters=spec.iters, min_time_s=spec.min_time_s, max_time_s=spec.max_time_s,
                    warmup_s=spec.warmup_s, on_batch=send, cancel=cancel, sync=sync)
    except Exception as e:  # noqa: BLE001 - the kernel (or the torch op) failed while being timed
        raise BenchFailed(f"kernel raised {one_line(e)}") from None
    if m.cancelled:
        raise _Cancelled()
    numerics, outputs_path = None, None
    if spec.verify_numerics or spec.save_outputs_to:
        outs = tuple(o.detach().cpu() for o in outputs())
        if spec.save_outputs_to:
            outputs_path = _save_outputs(outs, spec.save_outputs_to)
        if spec.verify_numerics:
            numerics = _numerics(spec, args, outs)
    return BenchOutcome(
        samples_us=m.samples_us, block_k=m.block_k, warmup_calls=m.warmup_calls, wall_s=m.wall_s,
        host_load=m.host_load, numerics=numerics, outputs_path=outputs_path, driver=driver,
        threads=spec.threads, truncated=m.truncated, overhead_fraction=m.overhead_fraction,
    )


def _torch_device(target_name: str) -> str:
    # ROCm builds of torch also call their device "cuda".
    return "cpu" if target_name == "cpu" else "cuda"


def _as_tensor_tuple(out) -> tuple:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _save_outputs(outs: tuple, path: str) -> str:
    import torch

    atomic_write(os.path.abspath(path), lambda f: torch.save(list(outs), f), make_parents=True, private=True)
    return path


def _numerics(spec: BenchSpec, args: tuple, outs: tuple) -> NumericsInfo:
    import torch

    from ..numerics import numerics_verdict

    reference = None
    if spec.compare_outputs_with:
        reference = tuple(torch.load(spec.compare_outputs_with))
    return numerics_verdict(spec.sig, args, outs, reference_outputs=reference)


class IreeCall:
    """A prepared kernel whose `call()` is ONE VM invoke and nothing else.

    Loading and uploading are the launchable's (`load_artifact`, `Launchable.prepare`: zero-copy DLPack on the
    CPU, one upload on a GPU). Its `Prepared.invoke()` goes through IREE's FunctionInvoker, which packs the
    arguments and wraps the results on every call (~2 us per call on this CPU, as much as a small kernel). Here
    the argument list is packed once and each call only allocates the results list and invokes, as
    iree-benchmark-module does. Results (for numerics) still come back through the launchable's conversion.
    """

    def __init__(self, modules: RuntimeCache, sig: Any, path: str, driver: str, threads: int, function: str,
                 args: tuple) -> None:
        from ..runtime.launchable import Launchable

        module = modules.module(path, driver, threads, function)
        self.driver = module.driver
        self.prepared = Launchable(sig, module).prepare(*args)
        self.call = _raw_invoke(module, self.prepared) or self.prepared.invoke

    def outputs(self) -> tuple:
        return _as_tensor_tuple(self.prepared.to_torch(self.prepared.invoke()))


def _raw_invoke(module: Any, prepared: Any) -> Callable[[], object] | None:
    """invoke(fn, packed args, fresh results list), or None when this IREE's invoker lacks what it needs."""
    import iree.runtime as rt

    fn = module.fn
    try:
        from iree.runtime.function import InvokeContext

        packed = fn._arg_packer.pack(InvokeContext(module.device), tuple(prepared.device_args), {})
        nret = max(1, len(fn._ret_descs or [None]))
        vm_fn = fn.vm_function
        invoke = module.context.vm_context.invoke
    except (AttributeError, ImportError, TypeError):
        return None
    new_list = rt.VmVariantList

    def call() -> object:
        ret = new_list(nret)
        invoke(vm_fn, packed, ret)
        return ret

    return call
