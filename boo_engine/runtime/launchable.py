"""Compiled kernels as Python callables taking and returning torch tensors.

`get_launchable(sig, target, variant)(*tensors)` behaves like `sig.reference(*tensors)`: same argument
convention, same result structure, shapes and dtypes. On the CPU, inputs go to IREE zero-copy through DLPack
(bf16 included: verified on IREE 3.13); outputs are copied out (see `_host_tensor` for why).

For timing, `Launchable.prepare(*tensors)` uploads once and returns a `Prepared` whose `invoke()` only calls the
kernel (no checks, no conversions), plus `to_torch(raw)` to read a result.

Runtime devices are created once per (driver, threads, allocator) per process: the benchmark worker's CPU device
has IREE's caching allocator (`load_artifact(caching_allocator=True)`), a library caller's the plain one. CPU
kernels run on `local-sync` (one thread, inline: the most stable measurement) by default; `threads > 1` uses
`local-task`, whose worker count IREE fixes when the first local-task device of the process is created, so a
process can only ever use one local-task size.
"""
from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

import numpy as np
import torch
from torch.utils.dlpack import to_dlpack

from ..errors import LaunchError
from ..ops.base import OpSignature
from ..targets import Target, parse_target, runtime_driver
from ..variants import BASELINE, Variant

if TYPE_CHECKING:
    from iree.runtime import (
        Config,
        DeviceArray,
        FunctionInvoker,
        HalDevice,
        SystemContext,
        VmContext,
        VmFunction,
        VmInstance,
        VmModule,
    )

    from ..compile.artifact import Artifact
    from ..compile.cache import KernelCache

#: what IREE's FunctionInvoker returns for a kernel: its result, or a tuple of them when it has several
RawResult: TypeAlias = "DeviceArray | tuple[DeviceArray, ...]"

_devices: dict[tuple[str, bool], Config] = {}
_devices_lock = threading.Lock()
_local_task_threads: int | None = None
CPU_DRIVERS = ("local-sync", "local-task")


def _runtime_config(driver: str, threads: int, caching: bool = False) -> Config:
    """One iree.runtime.Config (instance + device) per driver (and allocator choice) per process.

    `caching` (CPU drivers only; ignored on GPUs): the device's allocator keeps freed buffers for reuse
    (IREE's `--device_allocator=caching`), so a kernel's result buffer is not allocated, zeroed and freed on every
    call. The default heap allocator callocs each result: the zeroing costs ~50 us per MiB on this project's Zen 3
    and, for results above glibc's 32 MiB mmap ceiling, every call maps fresh pages and page-faults through them
    (a 64 MiB result: 16k faults, 49 ms per call vs 7 ms). Benchmark workers use it (`IreeCall`) and the
    reproducer passes the same flag to iree-benchmark-module; a library caller keeps the plain allocator, whose
    memory does not stay cached."""
    global _local_task_threads
    import iree.runtime as rt

    caching = caching and driver in CPU_DRIVERS
    with _devices_lock:
        if driver == "local-task":
            if _local_task_threads is None:
                rt.flags.parse_flags(f"--task_topology_max_group_count={max(1, threads)}")
                _local_task_threads = max(1, threads)
            elif _local_task_threads != max(1, threads):
                raise LaunchError(f"local-task already runs {_local_task_threads} threads in this process; "
                                  f"{threads} threads need a fresh process")
        cfg = _devices.get((driver, caching))
        if cfg is None:
            try:
                if caching:
                    cfg = rt.Config(device=rt.get_driver(driver).create_default_device(allocators=["caching"]))
                else:
                    cfg = rt.Config(driver)
            except Exception as e:  # noqa: BLE001
                raise LaunchError(f"IREE runtime driver {driver!r} is unavailable here: "
                                  f"{(str(e).splitlines() or [''])[0]}") from None
            _devices[(driver, caching)] = cfg
        return cfg


@dataclass
class LoadedModule:
    """A vmfb loaded on a device: `fn` is the `main` entry point."""

    fn: FunctionInvoker
    device: HalDevice
    driver: str
    context: SystemContext
    vmfb_path: str


def map_module(instance: VmInstance, vmfb_path: str) -> VmModule:
    """A VmModule over a READ-ONLY mapping of the file, zero-copy. IREE 3.13's `VmModule.mmap` opens the file
    for writing, so it fails on a read-only cache (EROFS, or a file the user may not write); a Python
    `mmap(ACCESS_READ)` wrapped with `wrap_buffer` needs read access only, is page-aligned, and is unmapped when
    the module goes (close_buffer). Same load time as `VmModule.mmap` (measured: ~55 us per module)."""
    import mmap

    import iree.runtime as rt

    with open(vmfb_path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        return rt.VmModule.wrap_buffer(instance, mapped, close_buffer=True)
    except BaseException:
        mapped.close()
        raise


def load_artifact(vmfb_path: str, driver: str, threads: int = 1, *, function: str = "main",
                  caching_allocator: bool = False) -> LoadedModule:
    """Map a .vmfb (read-only) and bind its entry point on `driver` (~1 ms for a cached kernel).
    `caching_allocator`: on a CPU driver, results come from a device whose allocator reuses freed buffers (see
    `_runtime_config`); what the benchmark worker times."""
    import iree.runtime as rt

    driver = runtime_driver(driver, threads)
    cfg = _runtime_config(driver, threads, caching_allocator)
    try:
        ctx = rt.SystemContext(config=cfg)
        ctx.add_vm_module(map_module(cfg.vm_instance, str(vmfb_path)))
        fn = ctx.modules.module[function]
    except Exception as e:  # noqa: BLE001
        raise LaunchError(f"cannot load {vmfb_path}: {(str(e).splitlines() or [''])[0]}") from None
    return LoadedModule(fn=fn, device=cfg.device, driver=driver, context=ctx, vmfb_path=str(vmfb_path))


class Prepared:
    """Arguments already on the device: `invoke()` is one kernel call and nothing else."""

    def __init__(self, launchable: Launchable, tensors: tuple[torch.Tensor, ...],
                 device_args: list[DeviceArray]):
        self.launchable = launchable
        self.tensors = tensors          # keeps zero-copy inputs alive
        self.device_args = device_args
        self._fn = launchable.module.fn

    def invoke(self) -> RawResult:
        """Call the kernel; returns IREE's raw result (a device array or a tuple of them)."""
        return self._fn(*self.device_args)

    def to_torch(self, raw: RawResult) -> torch.Tensor | tuple[torch.Tensor, ...]:
        return self.launchable.to_torch(raw)


class Launchable:
    """A compiled signature on a device. Call it like `sig.reference`."""

    def __init__(self, sig: OpSignature, module: LoadedModule, artifact: Artifact | None = None):
        self.sig = sig
        self.module = module
        self.artifact = artifact
        self._shapes = [tuple(int(d) for d in s) for s in sig.input_shapes()]
        self._dtypes = list(sig.input_dtypes())
        self._cpu = module.driver in CPU_DRIVERS
        self._n_out = len(sig.output_shapes())
        # the VM context and function behind iree.runtime's FunctionInvoker (private names in IREE 3.13: without
        # them, calls take the FunctionInvoker path)
        vm = (getattr(module.fn, "_vm_context", None), getattr(module.fn, "_vm_function", None))
        self._vm: tuple[VmContext, VmFunction] | None = vm if self._cpu and None not in vm else None
        self._tuple_out = bool(sig.returns_tuple) or self._n_out > 1
        if self._vm is not None:   # the fast path's callables, looked up once (each lookup is ~0.1-0.3 us a call)
            import iree.runtime as rt

            self._list, self._bv_type = rt.VmVariantList, rt.HalBufferView
            self._invoke, self._vm_function = self._vm[0].invoke, self._vm[1]
            dev = module.device
            self._import, self._export = dev.from_dlpack_capsule, dev.create_dlpack_capsule

    def __repr__(self) -> str:
        return f"Launchable({self.sig.func_name}, driver={self.module.driver})"

    def __call__(self, *tensors: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        if self._vm is not None:
            return self._call_cpu(self._check(tensors))
        return self.to_torch(self.prepare(*tensors).invoke())

    def _call_cpu(self, tensors: tuple[torch.Tensor, ...]) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """One call on a CPU driver, zero-copy both ways: inputs go in through DLPack, results come out through
        DLPack (`create_dlpack_capsule`: the tensor holds a reference to IREE's buffer, so nothing is copied and
        nothing is freed under it), and the VM is invoked directly rather than through iree.runtime's
        FunctionInvoker. What torch code pays per call beyond the kernel (measured on a Zen 3, 8^3 gemm): ~5 us
        this way, ~80 us through prepare() + to_torch() (FunctionInvoker's packing, the host mapping of each
        result and its copy)."""
        args = self._list(len(tensors))
        push, import_ = args.push_ref, self._import
        for t in tensors:
            push(import_(to_dlpack(t)))
        rets = self._list(self._n_out)
        self._invoke(self._vm_function, args, rets)
        export, bv = self._export, self._bv_type
        if not self._tuple_out:
            return torch.from_dlpack(export(rets.get_as_object(0, bv), 1, 0))
        return tuple(torch.from_dlpack(export(rets.get_as_object(i, bv), 1, 0)) for i in range(self._n_out))

    def prepare(self, *tensors: torch.Tensor) -> Prepared:
        """Check the arguments against the signature and put them on the device (zero-copy on the CPU)."""
        checked = self._check(tensors)
        return Prepared(self, checked, [self._to_device(t) for t in checked])

    def _check(self, tensors: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        if len(tensors) == len(self._shapes):
            for t, shape, dtype in zip(tensors, self._shapes, self._dtypes):
                if not (type(t) is torch.Tensor and t.shape == shape and t.dtype == dtype and not t.requires_grad
                        and t.is_contiguous() and (t.is_cpu or not self._cpu)):
                    break
            else:
                return tuple(tensors)     # the common case: ~0.5 us a tensor
        name = self.sig.func_name
        if len(tensors) != len(self._shapes):
            raise LaunchError(f"{name}: takes {len(self._shapes)} tensors, got {len(tensors)}")
        out = []
        for i, (t, shape, dtype) in enumerate(zip(tensors, self._shapes, self._dtypes)):
            if not isinstance(t, torch.Tensor):
                raise LaunchError(f"{name}: argument {i} must be a torch.Tensor, got {type(t).__name__}")
            if tuple(t.shape) != shape:
                raise LaunchError(f"{name}: argument {i} has shape {tuple(t.shape)}, expected {shape}")
            if t.dtype != dtype:
                raise LaunchError(f"{name}: argument {i} has dtype {t.dtype}, expected {dtype}")
            if t.requires_grad:
                t = t.detach()
            if t.device.type != "cpu" and self._cpu:
                t = t.cpu()
            out.append(t.contiguous())  # no copy when already contiguous
        return tuple(out)

    def _to_device(self, t: torch.Tensor) -> DeviceArray:
        import iree.runtime as rt

        dev = self.module.device
        if self._cpu:
            return rt.DeviceArray(dev, dev.from_dlpack_capsule(t.__dlpack__()))
        t = t.cpu()
        if t.dtype == torch.bfloat16:
            # numpy has no bf16: upload the bits, typed bf16. IREE 3.13's `asdevicearray` drops its
            # element_type argument (it maps the numpy dtype: si16), so the kernel refused the buffer on a GPU
            # ("tensor element type mismatch; expected bf16 but have si16", seen on an H100): allocate directly.
            bits = np.ascontiguousarray(t.view(torch.int16).numpy())
            view = dev.allocator.allocate_buffer_copy(
                memory_type=rt.MemoryType.DEVICE_LOCAL, allowed_usage=rt.BufferUsage.DEFAULT, device=dev,
                buffer=bits, element_type=rt.HalElementType.BFLOAT_16)
            return rt.DeviceArray(dev, view, override_dtype=bits.dtype)
        return rt.asdevicearray(dev, t.numpy())

    def to_torch(self, raw: RawResult) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """IREE result(s) -> torch CPU tensor(s), in the structure `sig.reference` returns."""
        items = list(raw) if isinstance(raw, (tuple, list)) else [raw]
        tensors = tuple(_host_tensor(x) for x in items)
        if self.sig.returns_tuple or len(tensors) > 1:
            return tensors
        return tensors[0]


def _host_tensor(x: DeviceArray | np.ndarray) -> torch.Tensor:
    """Copy one result out. A copy, not a view: in IREE 3.13 the numpy array `to_host()` returns does not keep
    the mapped buffer alive, so a view would read freed memory once the result object is gone (seen: garbage
    bf16 outputs as soon as torch reused the memory)."""
    host = x.to_host() if hasattr(x, "to_host") else np.asarray(x)
    if str(host.dtype) == "bfloat16":  # numpy has no native bf16: reinterpret the bits
        return torch.from_numpy(host.view(np.uint16)).clone().view(torch.bfloat16)
    return torch.from_numpy(host).clone()


def get_launchable(sig: OpSignature, target: Target | str = "cpu", variant: Variant | None = None, *,
                   cache: KernelCache | None = None, threads: int | None = None,
                   timeout_s: float | None = None) -> Launchable:
    """Compile `sig` through the cache if needed (a cache hit neither exports nor compiles) and load it.

    `threads` (cpu only) overrides `target.threads`. Raises CompileError or LaunchError."""
    from ..compile.build import DEFAULT_TIMEOUT_S, compile_signature

    target = target if isinstance(target, Target) else parse_target(target)
    art = compile_signature(sig, target, variant or BASELINE, cache=cache,
                            timeout_s=timeout_s or DEFAULT_TIMEOUT_S)
    n = threads if threads is not None else target.threads
    driver = runtime_driver(target.kind, n)
    return Launchable(sig, load_artifact(art.vmfb_path, driver, n), art)
