"""The benchmark worker's child process: it receives jobs (`RunJob`), measures them and streams the samples back.

It imports torch and IREE once, sets the process-global thread settings before either creates a thread pool, and
keeps loaded modules warm between jobs (`RuntimeCache`). A job that fails here (the kernel raises, an artifact
does not load) is answered with `JobFailed` and the process stays up; a crash or a hang is the parent's to
notice (see `worker.py`).

The spawned process imports this module first, so its top level imports nothing heavy: torch, IREE and the
launchable are imported inside the functions that need them.
"""
from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

from ..errors import BooError, one_line
from ..fsutil import atomic_write
from ..process_setup import ignore_stop_signals, redirect_output_if_asked
from ..results import IREE, CacheMode, NumericsInfo
from ..targets import runtime_driver
from .dispatch_time import dispatch_time
from .messages import (
    BenchOutcome,
    BenchSpec,
    CancelJob,
    Close,
    DeviceDetail,
    JobCancelled,
    JobDone,
    JobFailed,
    Ready,
    RunJob,
    Samples,
)

if TYPE_CHECKING:
    import torch

    from ..ops.base import OpSignature
    from ..runtime.launchable import LoadedModule, Prepared
    from .placement import Placement

#: a job's inputs, in the order the kernel takes them, and a kernel's outputs
Tensors = tuple["torch.Tensor", ...]


class _JobError(BooError):
    """A job failed in a way the user should read as-is (sent as JobFailed)."""


class _Cancelled(Exception):
    """The job saw its CancelJob between two samples."""


class _SeqCancel:
    """The harness's cancel flag for ONE job: set once a CancelJob with this job's seq arrived."""

    def __init__(self, seq: int, cancelled: set[int]) -> None:
        self._seq, self._cancelled = seq, cancelled

    def is_set(self) -> bool:
        return self._seq in self._cancelled


def _child_main(inbox: Connection, outbox: Connection, threads: int) -> None:
    """Entry point of the worker process: answer every RunJob in order until Close or the parent's end closes.

    A reader thread takes CancelJob while a job is measuring (the main thread is busy in the timing loop), so a
    cancel reaches the harness at its next sample boundary. Stop signals are ignored: the parent records the job
    in flight as interrupted, then stops us.
    """
    ignore_stop_signals()
    redirect_output_if_asked()
    _set_process_threads(threads)
    import iree.runtime  # noqa: F401  (imported once, here, so jobs do not pay for it)
    import torch  # noqa: F401

    jobs: queue.Queue[RunJob | None] = queue.Queue()   # None: stop
    cancelled: set[int] = set()

    def read() -> None:
        while True:
            try:
                msg = inbox.recv()
            except (EOFError, OSError):
                jobs.put(None)
                return
            match msg:
                case RunJob():
                    jobs.put(msg)
                case CancelJob(seq=seq):
                    cancelled.add(seq)
                case Close():
                    jobs.put(None)
                    return

    threading.Thread(target=read, name="boo-bench-inbox", daemon=True).start()
    cache = RuntimeCache()
    outbox.send(Ready(os.getpid()))
    while (job := jobs.get()) is not None:
        seq = job.seq

        def send(batch: list[float], seq: int = seq) -> None:
            outbox.send(Samples(seq, tuple(batch)))

        try:
            outcome = run_spec(job.spec, cache, send, _SeqCancel(seq, cancelled))
        except _Cancelled:
            outbox.send(JobCancelled(seq))
        except Exception as e:  # noqa: BLE001 - any failure of the job is a failed result, one line
            outbox.send(JobFailed(seq, one_line(e)))
        else:
            outbox.send(JobDone(seq, outcome))
        cancelled.discard(seq)


def _set_process_threads(threads: int) -> None:
    """Process-global thread settings, before the first local-task device or torch op exists."""
    import iree.runtime as rt
    import torch

    if threads > 1:
        rt.flags.parse_flags(f"--task_topology_max_group_count={threads}")
    torch.set_num_threads(threads)


class RuntimeCache:
    """Loaded modules the worker keeps warm between jobs, reused while the .vmfb file is unchanged.
    (Devices are cached per process by `boo_engine.runtime.launchable`; on the CPU the worker's device has the
    caching allocator: see `IreeCall`.)"""

    def __init__(self) -> None:
        #: (the file's real path, mtime_ns, size, driver, threads, function) -> the module loaded from it
        self._modules: dict[tuple[str, int, int, str, int, str], LoadedModule] = {}

    def module(self, path: str, driver: str, threads: int, function: str) -> LoadedModule:
        from ..runtime.launchable import load_artifact

        st = os.stat(path)
        key = (os.path.realpath(path), st.st_mtime_ns, st.st_size, driver, threads, function)
        module = self._modules.get(key)
        if module is None:
            module = self._modules[key] = load_artifact(path, driver, threads, function=function,
                                                        caching_allocator=True)
        return module


def run_spec(spec: BenchSpec, cache: RuntimeCache, send: Callable[[list[float]], None],
             cancel: _SeqCancel) -> BenchOutcome:
    """Measure `spec` in this process: samples go to `send` in batches; the outputs are saved and checked after
    the timing, so neither costs the measurement anything."""
    import torch

    from .flush import make_flush
    from .gpu_timing import GpuMonitor
    from .harness import measure
    from .memory import check_fits

    torch.set_num_threads(spec.threads)
    device = _torch_device(spec.target_name)
    # before anything is allocated: a job too big for the device fails as one line naming its size
    check_fits(spec.sig, device, numerics=spec.verify_numerics or bool(spec.save_outputs_to))
    args = _placed_args(spec, device)
    k = _Callables.of(spec, cache, args, device)
    flush, flush_note = make_flush(device) if spec.cache_mode == CacheMode.COLD else (None, None)
    monitor = GpuMonitor() if device != "cpu" else contextlib.nullcontext()
    try:
        with monitor:
            m = measure(k.call, iters=spec.iters, min_time_s=spec.min_time_s, max_time_s=spec.max_time_s,
                        warmup_s=spec.warmup_s, on_batch=send, cancel=cancel, sync=k.sync, flush=flush,
                        thread_cpu=device == "cpu" and spec.threads == 1)
    except Exception as e:  # noqa: BLE001 - the kernel (or the torch op) failed while being timed
        raise _JobError(f"kernel raised {one_line(e)}") from None
    if m.cancelled:
        raise _Cancelled()
    detail, device_us, throttled = _device_detail(spec, device, monitor, flush_note, m.samples_us, k, flush)
    numerics, outputs_path = None, None
    if spec.verify_numerics or spec.save_outputs_to:
        outs = tuple(o.detach().cpu() for o in k.outputs())
        if spec.save_outputs_to:
            outputs_path = _save_outputs(outs, spec.save_outputs_to)
        if spec.verify_numerics:
            numerics = _numerics(spec, args, outs, k.run_on)
    return BenchOutcome(
        samples_us=m.samples_us, block_k=m.block_k, warmup_calls=m.warmup_calls, wall_s=m.wall_s,
        host_load=m.host_load, numerics=numerics, outputs_path=outputs_path, driver=k.driver,
        threads=spec.threads, truncated=m.truncated, overhead_fraction=m.overhead_fraction,
        cache_mode=spec.cache_mode, device_us=device_us, device_detail=detail, throttled=throttled,
        cpu_us=m.cpu_us, steal=m.steal,
    )


@dataclass(frozen=True)
class _Callables:
    """What a spec's backend gives the timing and the numerics: the timed call, its outputs, the outputs for other
    inputs (more seeds, the structured test), a device sync (eager torch on a GPU) and the IREE driver used."""

    call: Callable[[], object]
    outputs: Callable[[], Tensors]
    run_on: Callable[[Tensors], Tensors]
    sync: Callable[[], None] | None = None
    driver: str | None = None

    @staticmethod
    def of(spec: BenchSpec, cache: RuntimeCache, args: Tensors, device: str) -> _Callables:
        if spec.backend == IREE:
            vmfb = spec.vmfb_path
            if vmfb is None:
                raise _JobError("iree backend needs vmfb_path")
            kernel = IreeCall(cache, spec.sig, vmfb, runtime_driver(spec.driver, spec.threads), spec.threads,
                              spec.function, args)

            def run_on(other: Tensors) -> Tensors:
                return IreeCall(cache, spec.sig, vmfb, runtime_driver(spec.driver, spec.threads), spec.threads,
                                spec.function, other).outputs()
            return _Callables(kernel.call, kernel.outputs, run_on, driver=kernel.driver)
        import torch

        call = spec.sig.eager(*(a.to(device) for a in args))
        return _Callables(call, lambda: _as_tensor_tuple(call()),
                          lambda other: _as_tensor_tuple(spec.sig.reference(*(a.to(device) for a in other))),
                          sync=torch.cuda.synchronize if device != "cpu" else None)


def _device_detail(spec: BenchSpec, device: str, monitor: object, flush_note: str | None, samples_us: list[float],
                   k: _Callables, flush: Callable[[], None] | None) -> tuple[DeviceDetail | None, float | None, bool]:
    """(the result's device detail: a GPU's clocks and throttling, the flush, the dispatches' device time; the
    device time per call; whether the GPU throttled), after the timing."""
    from .gpu_timing import GpuMonitor, profile_dispatches

    detail: DeviceDetail | None = None
    device_us, throttled = None, False
    if device != "cpu":
        state = monitor.summary() if isinstance(monitor, GpuMonitor) else None
        throttled = bool(state and state["throttled_share"] > 0)
        detail = {"gpu_state": state, "flush": flush_note}
    elif flush_note:
        detail = {"flush": flush_note}
    if spec.device_timing and (spec.backend == IREE or device != "cpu"):
        detail = detail if detail is not None else {}
        detail["dispatch"] = dispatch_time(spec, device, samples_us, lambda: profile_dispatches(k.call, k.sync, flush))
        device_us = detail["dispatch"].get("device_us")
    return detail, device_us, throttled


#: the inputs of the last job, placed (bench/placement.py): (what they are, their Placement, the args)
_LAST_PLACED: list[tuple[tuple[OpSignature, int, float | None, int], Placement, Tensors]] = []


def _placed_args(spec: BenchSpec, device: str) -> Tensors:
    """The job's inputs. On the CPU each round gets a fresh placement of them (bench/placement.py), and the jobs
    of one round that take the same inputs (a command's baseline, variants and torch column) share it: in one run
    a comparison then sees the kernels on the very same memory, and the rounds sample the placements. The last
    placement stays alive until a job needs another one."""
    from .placement import Placement

    if device != "cpu":
        return spec.sig.get_sample_args(spec.seed, splat_value=spec.splat_value)
    key = (spec.sig, spec.seed, spec.splat_value, spec.placement)
    if _LAST_PLACED and _LAST_PLACED[0][0] == key:
        return _LAST_PLACED[0][2]
    if _LAST_PLACED:
        _LAST_PLACED.pop()[1].close()
    placement = Placement()
    args = placement.place(spec.sig.get_sample_args(spec.seed, splat_value=spec.splat_value))
    _LAST_PLACED.append((key, placement, args))
    return args


def _torch_device(target_name: str) -> str:
    # ROCm builds of torch also call their device "cuda".
    return "cpu" if target_name == "cpu" else "cuda"


def _as_tensor_tuple(out: torch.Tensor | tuple[torch.Tensor, ...] | list[torch.Tensor]) -> Tensors:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _save_outputs(outs: Tensors, path: str) -> str:
    import torch

    atomic_write(os.path.abspath(path), lambda f: torch.save(list(outs), f), make_parents=True, private=True)
    return path


def _numerics(spec: BenchSpec, args: Tensors, outs: Tensors, run_on: Callable[[Tensors], Tensors]) -> NumericsInfo:
    """The check `spec.numerics` asks for: the measured call's outputs, plus further seeds until the main output
    gave `min_samples` errors (against the high-precision reference: a variant compared with its baseline's
    saved outputs has those for the first seed only), plus the structured test."""
    import torch

    from ..numerics import add_structured, batches_needed, numerics_verdict, structured_args, structured_verdict

    criteria = spec.numerics
    reference = None
    if spec.compare_outputs_with:
        reference = tuple(torch.load(spec.compare_outputs_with))
    more = []
    if reference is None and spec.splat_value is None:   # (a splat gives every seed the same inputs)
        for b in range(1, batches_needed(spec.sig, criteria)):
            other = spec.sig.get_sample_args(spec.seed + b, splat_value=spec.splat_value)
            more.append((other, tuple(o.detach().cpu() for o in run_on(other))))
    info = numerics_verdict(spec.sig, args, outs, reference_outputs=reference, criteria=criteria, more=more)
    if criteria.structured:
        sargs = structured_args(spec.sig)
        add_structured(info, structured_verdict(spec.sig, sargs, tuple(o.detach().cpu() for o in run_on(sargs))))
    return info


class IreeCall:
    """A prepared kernel whose `call()` is ONE VM invoke and nothing else.

    Loading and uploading are the launchable's (`load_artifact`, `Launchable.prepare`: zero-copy DLPack on the
    CPU, one upload on a GPU). Its `Prepared.invoke()` goes through IREE's FunctionInvoker, which packs the
    arguments and wraps the results on every call (~2 us per call on this CPU, as much as a small kernel). Here
    the argument list is packed once and each call only allocates the results list and invokes, as
    iree-benchmark-module does. Results (for numerics) still come back through the launchable's conversion.

    On the CPU the device's allocator is IREE's caching allocator (`load_artifact(caching_allocator=True)`): the
    result buffer a call frees is the one the next call gets, so the timed call neither allocates, zeroes nor
    page-faults its output; with the plain heap allocator every call callocs its results (zeroing grows with the
    output size, and results above 32 MiB come from fresh mmaps: a fault per 4 KiB page on every call). The
    reproducer command passes `--device_allocator=caching` so iree-benchmark-module times the same thing. What
    an earlier job left in the pool is released here, before this job's inputs are placed.
    """

    def __init__(self, modules: RuntimeCache, sig: OpSignature, path: str, driver: str, threads: int, function: str,
                 args: Tensors) -> None:
        from ..runtime.launchable import CPU_DRIVERS, Launchable

        module = modules.module(path, driver, threads, function)
        self.driver: str = module.driver
        if module.driver in CPU_DRIVERS:
            module.device.allocator.trim()
        self.prepared = Launchable(sig, module).prepare(*args)
        self.call: Callable[[], object] = _raw_invoke(module, self.prepared) or self.prepared.invoke

    def outputs(self) -> Tensors:
        return _as_tensor_tuple(self.prepared.to_torch(self.prepared.invoke()))


def _raw_invoke(module: LoadedModule, prepared: Prepared) -> Callable[[], object] | None:
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
