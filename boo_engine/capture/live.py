"""Capturing a live model: load `FILE.py:factory` or `package.module:factory`, build inputs from `--input` specs,
time the eager pass without the profiler, then record RECORDED_PASSES passes with torch.profiler and read its chrome
trace with the same converter as `--trace` (trace.py).

Why the profiler: its events carry exactly what BOO's aten lines are made of (names, input dims, dtypes, strides,
concrete scalars, per the chrome trace it exports), plus durations and nesting, so the outermost op of each call
chain is found by time interval; a dispatch mode would only see the decomposed ops below the composite ones
(aten.convolution, never aten::conv2d) and would time nothing. Its cost is the profiler's per-op overhead in the
recorded pass (benchmarks/bench_capture.py measures it), which is one reason shares are of the recorded calls' own
total (the compute total, lines.py), never of the eager time measured without the profiler (which also holds Python,
the ops left out, and every moment the thread lost its core).

Threads: torch runs with `threads` CPU threads (1 unless told), the count boo-tui measures the commands with by
default (`--threads`): with torch's default (2 on a busy 2-vCPU host) a conv/bn/attention net's eager pass took
112 ms against 3.6 ms with one thread, and its shares summed to 808% (docs/performance.md, "Capture shares").

torch is imported inside the functions: importing this module (and `boo-tui capture --trace`) needs no torch.
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import itertools
import json
import os
import re
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from .allocator import SteadyHeap, steady_malloc
from .errors import CaptureError, first_line
from .trace import TraceCalls, outermost_calls

if TYPE_CHECKING:
    import torch

T = TypeVar("T")

#: --input dtype names -> torch attribute names
DTYPES = {
    "float32": "float32", "float": "float32", "fp32": "float32", "float16": "float16", "half": "float16",
    "fp16": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16", "float64": "float64", "double": "float64",
    "int64": "int64", "long": "int64", "int32": "int32", "int": "int32", "int16": "int16", "int8": "int8",
    "uint8": "uint8", "bool": "bool",
}
_SHAPE = re.compile(r"[0-9]{1,9}(?:x[0-9]{1,9}){0,15}")


@dataclass(frozen=True)
class InputSpec:
    """One model input: its shape and dtype (a key of DTYPES, normalized to the torch name)."""

    shape: tuple[int, ...]
    dtype: str

    def __str__(self) -> str:
        return f"{'x'.join(map(str, self.shape)) or 'scalar'}:{self.dtype}"


def parse_input(text: str) -> InputSpec:
    """`2x3x224x224` or `2x3x224x224:float16` (`scalar:float32` for a 0-d input). CaptureError otherwise."""
    shape_text, _, dtype_text = text.strip().partition(":")
    dtype = DTYPES.get((dtype_text or "float32").strip().lower())
    if dtype is None:
        raise CaptureError(f"--input {text[:80]!r}: unknown dtype {dtype_text[:40]!r} "
                           f"(one of {', '.join(sorted(set(DTYPES.values())))})")
    shape_text = shape_text.strip().lower()
    if shape_text == "scalar":
        return InputSpec((), dtype)
    if not _SHAPE.fullmatch(shape_text):
        raise CaptureError(f"--input {text[:80]!r}: expected a shape like 2x3x224x224, optionally :DTYPE")
    return InputSpec(tuple(int(d) for d in shape_text.split("x")), dtype)


def load_factory(spec: str) -> tuple[Callable[[], object], str]:
    """`path/to/file.py:factory` or `package.module:factory` -> (the factory, where it came from). CaptureError
    when the spec has no `:factory`, the module fails to import (its message) or has no such callable."""
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name.isidentifier():
        raise CaptureError(f"MODEL {spec[:120]!r}: expected path/to/file.py:factory or package.module:factory")
    if where.endswith(".py") or os.sep in where or "/" in where:
        path = Path(where)
        if not path.is_file():
            raise CaptureError(f"model file {where} does not exist")
        mod_name = f"_boo_capture_{path.stem}"
        try:
            loader_spec = importlib.util.spec_from_file_location(mod_name, path)
            if loader_spec is None or loader_spec.loader is None:
                raise ImportError(f"cannot load {path}")
            module = importlib.util.module_from_spec(loader_spec)
            sys.modules[mod_name] = module
            sys.path.insert(0, str(path.resolve().parent))  # its sibling modules import as in a script
            try:
                loader_spec.loader.exec_module(module)
            finally:
                with contextlib.suppress(ValueError):
                    sys.path.remove(str(path.resolve().parent))
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            raise CaptureError(f"cannot import {where}: {first_line(e)}") from None
    else:
        try:
            module = importlib.import_module(where)
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            raise CaptureError(f"cannot import {where}: {first_line(e)}") from None
    factory = getattr(module, name, None)
    if not callable(factory):
        raise CaptureError(f"{where} has no callable {name!r}")
    return factory, f"{where}:{name}"


@dataclass(frozen=True)
class ModelCapture:
    """What one capture found: the calls (trace.py), the eager time shares are taken of, and facts for the
    header."""

    trace: TraceCalls
    eager_us: float
    """median wall time of an eager pass, profiler off"""
    eager_min_us: float
    """the fastest of those passes"""
    eager_runs: int
    profiled_us: float
    """median wall time of a recorded pass, profiler on (after a profiled warm-up pass)"""
    facts: dict[str, str]


class ModelExited(BaseException):
    """The user's code called os._exit(code) (see `_exit_refused`)."""

    def __init__(self, code: int) -> None:
        super().__init__(f"called os._exit({code})")
        self.code = code


@contextlib.contextmanager
def _exit_refused() -> Iterator[None]:
    """While the user's model is imported and run, `os._exit` raises instead of ending this process: a model
    that called os._exit(0) ended `capture` with exit 0, no output and not a word. A child forked meanwhile (a
    DataLoader worker) still exits for real."""
    real, owner = os._exit, os.getpid()

    def refused(code: int = 0) -> None:
        if os.getpid() != owner:
            real(code)
        raise ModelExited(code)

    os._exit = refused  # type: ignore[assignment]
    try:
        yield
    finally:
        os._exit = real


def _call_user(what: str, fn: Callable[[], T]) -> T:
    try:
        return fn()
    except KeyboardInterrupt:
        raise
    except (ModelExited, SystemExit) as e:
        how = "os._exit" if isinstance(e, ModelExited) else "sys.exit"
        raise CaptureError(f"{what} called {how}({e.code}): it would end the capture with nothing written; "
                           "capture a model that returns") from None
    except BaseException as e:  # noqa: BLE001 - the user's code: one line, exit 2
        raise CaptureError(f"{what} failed: {first_line(e)}") from None


def capture_model(model_spec: str, inputs: Sequence[InputSpec], *, backward: bool = False,
                  layout: str | None = None, eval_mode: bool = False, threads: int = 1,
                  min_time_s: float = 0.5) -> ModelCapture:
    """Load, run once (warm-up), time eager passes, record RECORDED_PASSES passes; see the module docstring.
    `threads`: torch's CPU threads, as the measurement will use (boo-tui's `--threads`, 1 by default). On a shared
    2-core host a small net's pass took 10.9 ms with 2 threads and 1.5 ms with 1 (the other threads' barriers wait
    for a descheduled one)."""
    if threads < 1:
        raise CaptureError(f"--threads {threads}: give at least 1")
    with _exit_refused():
        return _capture(model_spec, inputs, backward=backward, layout=layout, eval_mode=eval_mode,
                        threads=threads, min_time_s=min_time_s)


def _capture(model_spec: str, inputs: Sequence[InputSpec], *, backward: bool, layout: str | None,
             eval_mode: bool, threads: int, min_time_s: float) -> ModelCapture:
    factory, where = load_factory(model_spec)
    import torch

    torch.set_num_threads(threads)

    made = _call_user(f"{where}()", factory)
    if not isinstance(made, torch.nn.Module):
        raise CaptureError(f"{where}() returned a {type(made).__name__}, not a torch.nn.Module")
    model = made
    floats = {s.dtype for s in inputs if s.dtype in ("float16", "bfloat16", "float64")}
    if len(floats) == 1 and all(s.dtype != "float32" for s in inputs):
        dtype = getattr(torch, floats.pop())  # a half-precision input: the model runs in it too
        model = _call_user(f"model.to({dtype})", lambda: model.to(dtype))
    if eval_mode:
        _call_user("model.eval()", model.eval)
    torch.manual_seed(0)
    args = [_make_input(s) for s in inputs]
    if layout == "nhwc":
        _call_user("converting the model to channels-last", lambda: _model_channels_last(model))
        args = [_channels_last(a) for a in args]
    grads: list[torch.Tensor] = []

    def one_pass() -> None:
        if not backward:
            with torch.no_grad():
                model(*args)
            return
        for p in model.parameters():
            p.grad = None  # no AccumulateGrad add_ in the recorded pass: every pass sees fresh gradients
        outs = [t for t in _leaves(model(*args)) if t.requires_grad]
        torch.autograd.backward(outs, grads)

    if backward:  # d(sum of outputs)/d(out) = ones, made outside the timed passes: no sum op is recorded
        with torch.enable_grad():
            first = [t for t in _leaves(_call_user("the model's forward", lambda: model(*args))) if t.requires_grad]
        if not first:
            raise CaptureError("--backward: no output of the model requires grad (no trainable parameters?)")
        grads.extend(torch.ones_like(t) for t in first)
    _call_user("the model's pass", one_pass)
    # warm-up: the first passes pay for oneDNN primitive creation and allocator growth (a small conv net's first
    # pass took 926 ms, its second 58 ms, later ones 2-14 ms here), so at least 2 more and 0.2 s before timing
    def checked_pass() -> None:  # the model's own errors as one line; ours (trace reading) stay bugs
        _call_user("a pass of the model", one_pass)

    with steady_malloc() as heap:
        times = _eager_times(checked_pass, min_time_s)
        trace, profiled_us, faults = _record(checked_pass, heap)
    facts = {"model": where, "inputs": " ".join(map(str, inputs)) or "(none)",
             "pass": "forward + backward of the sum of the outputs" if backward else "forward (no_grad)",
             "layout": "channels_last (--layout nhwc)" if layout == "nhwc" else "as built",
             "mode": "eval" if eval_mode else ("train" if model.training else "eval"),
             "torch": torch.__version__, "threads": str(torch.get_num_threads()), "allocator": heap.describe(faults)}
    return ModelCapture(trace, statistics.median(times) * 1e6, min(times) * 1e6, len(times), profiled_us, facts)


def _eager_times(one_pass: Callable[[], None], min_time_s: float) -> list[float]:
    """Warm-up, then the wall time of passes (at least 5 and `min_time_s`, at most 100), profiler off."""
    warm_t0 = time.perf_counter()
    for i in range(50):
        if i >= 2 and time.perf_counter() - warm_t0 > min_time_s / 2:
            break
        one_pass()
    times: list[float] = []
    while len(times) < 5 or (sum(times) < min_time_s and len(times) < 100):
        t0 = time.perf_counter()
        one_pass()
        times.append(time.perf_counter() - t0)
    return times


#: passes recorded (one ProfilerStep each): a command's calls are the median over them, each call's time the least
#: (lines.merge)
RECORDED_PASSES = 5


def _record(one_pass: Callable[[], None], heap: SteadyHeap) -> tuple[TraceCalls, float, int | None]:
    """RECORDED_PASSES passes recorded with the profiler, after a profiled warm-up step (the profiler's own start
    costs ~1 s the first time in a process, and its first step runs cold), exported as one chrome trace. Returns
    the calls, the median wall time of a recorded pass and its median count of page faults (None where the process
    cannot count them).

    Before the first recorded pass the heap gets a touched reserve: each recorded pass grows the heap by about
    what it allocates (the profiler's records fill the holes its tensors left, allocator.py), so RECORDED_PASSES + 1
    times the warm-up step's growth (which includes the profiler's start), and 16 MiB more."""
    from torch.profiler import ProfilerActivity, profile, schedule

    fd, tmp = tempfile.mkstemp(prefix="boo-capture-", suffix=".json")
    os.close(fd)
    step_s: list[float] = []
    faults: list[int] = []
    try:
        with warnings.catch_warnings(), _quiet_stderr():
            warnings.simplefilter("ignore", UserWarning)  # "Profiler clears events at the end of each cycle"
            with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                         schedule=schedule(wait=0, warmup=1, active=RECORDED_PASSES),
                         on_trace_ready=lambda p: p.export_chrome_trace(tmp)) as prof:
                before = heap.heap_bytes()
                for step in range(1 + RECORDED_PASSES):
                    after = heap.heap_bytes() if step == 1 else None
                    if before is not None and after is not None:
                        heap.reserve((RECORDED_PASSES + 1) * max(after - before, 0) + (16 << 20))
                    f0 = _minor_faults()
                    t0 = time.perf_counter()
                    one_pass()
                    step_s.append(time.perf_counter() - t0)
                    f1 = _minor_faults()
                    if f0 is not None and f1 is not None:
                        faults.append(f1 - f0)
                    prof.step()
        with open(tmp, "rb") as f:
            data = json.load(f)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return (outermost_calls(data, "the recorded passes"), statistics.median(step_s[1:]) * 1e6,
            round(statistics.median(faults[1:])) if len(faults) > 1 else None)


def _minor_faults() -> int | None:
    """This process's minor page faults so far (None without the resource module: not Unix)."""
    try:
        import resource
    except ImportError:
        return None
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Kineto prints `USDT: ... profiler_start` / `profiler_stop` on the process's stderr at every start: keep
    them off the user's terminal (they are shown when the block fails with an error of ours or the profiler's, in
    case they explain it)."""
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    with tempfile.TemporaryFile() as sink:
        sys.stderr.flush()
        os.dup2(sink.fileno(), 2)
        replay = True
        try:
            yield
            replay = False
        except CaptureError:  # the model's own error, already one line
            replay = False
            raise
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            if replay:
                sink.seek(0)
                sys.stderr.write(sink.read().decode(errors="replace"))


def _make_input(spec: InputSpec) -> torch.Tensor:
    import torch

    dtype = getattr(torch, spec.dtype)
    if dtype.is_floating_point:
        return torch.randn(spec.shape, dtype=dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, spec.shape).bool()
    return torch.randint(0, 2, spec.shape, dtype=dtype)  # 0/1: valid indices for any embedding


def _model_channels_last(model: torch.nn.Module) -> None:
    """The model's 4-D parameters and buffers channels_last, its 5-D ones channels_last_3d, in place.
    `model.to(memory_format=torch.channels_last)` gives every 4-D and 5-D tensor the 4-D format, and fails on a
    Conv3d's weight ('required rank 4 tensor to use channels_last format')."""
    import torch

    with torch.no_grad():
        for t in itertools.chain(model.parameters(), model.buffers()):
            if t.dim() in (4, 5):
                t.data = _channels_last(t.data)


def _channels_last(t: torch.Tensor) -> torch.Tensor:
    import torch

    if t.dim() == 4:
        return t.contiguous(memory_format=torch.channels_last)
    if t.dim() == 5:
        return t.contiguous(memory_format=torch.channels_last_3d)
    return t


def _leaves(out: object) -> list[torch.Tensor]:
    """The floating tensors of a model's output (a tensor, or tuples / lists / dicts of them)."""
    import torch

    if isinstance(out, torch.Tensor):
        return [out] if out.is_floating_point() else []
    if isinstance(out, dict):
        return [t for v in out.values() for t in _leaves(v)]
    if isinstance(out, list | tuple):
        return [t for v in out for t in _leaves(v)]
    return []
