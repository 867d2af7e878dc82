"""Running iree-compile: in a process group of its own (it starts a linker child), killed with the whole group on
timeout, and killed and retried when it stops making progress. Every compile of the engine runs here: a kernel
into the cache (build.py) and a dispatch dump (dump.py)."""
from __future__ import annotations

import signal
import subprocess
import time

from ..errors import CompileError
from ..iree_tools import first_error
from .procs import cpu_ticks, kill_group

#: A compile whose CPU time does not move for this long is deadlocked, not slow (a real compile burns CPU all
#: the time). Seen once with iree-compile 3.13: threads parked on a futex at 0% CPU until the 600 s timeout; the
#: same command then compiled in 0.6 s. Such a compile is killed and retried once.
STALL_S = 60.0


class Stalled(Exception):
    """One run made no CPU progress for stall_s and was killed (its stderr so far kept)."""

    def __init__(self, stderr: str):
        super().__init__("stalled")
        self.stderr = stderr


def run_compiler(cmd: list[str], shown: list[str], func: str, timeout_s: float, *,
                 stall_s: float = STALL_S, retries: int = 1) -> float:
    """Run iree-compile in its own process group; kill the whole group on timeout. A run that makes no CPU
    progress for `stall_s` is killed and retried (`retries` times). Returns wall seconds of the successful run.
    Raises CompileError (timed out, deadlocked, crashed, failed: the first error as one line, the full stderr
    and `shown`, the command line to report, kept on the exception)."""
    for attempt in range(retries + 1):
        try:
            return run_compiler_once(cmd, shown, func, timeout_s, stall_s)
        except Stalled as e:
            if attempt == retries:
                raise CompileError(
                    f"{func}: iree-compile made no progress for {stall_s:g} s (deadlocked) and was killed "
                    f"{retries + 1} times", stderr=e.stderr, command=shown) from None
    raise AssertionError("unreachable")


def run_compiler_once(cmd: list[str], shown: list[str], func: str, timeout_s: float, stall_s: float) -> float:
    t0 = time.perf_counter()
    deadline = time.monotonic() + timeout_s
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                            process_group=0)
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
                    kill_group(proc.pid)
                    out, err = proc.communicate()
                    raise CompileError(f"{func}: iree-compile timed out after {timeout_s:g} s", stderr=err or "",
                                       command=shown) from None
                cpu = cpu_ticks(proc.pid)
                if cpu is None or cpu != last_cpu:
                    last_cpu, last_change = cpu, now
                elif now - last_change >= stall_s:
                    kill_group(proc.pid)
                    out, err = proc.communicate()
                    raise Stalled(err or "") from None
    except (CompileError, Stalled):
        raise
    except BaseException:
        kill_group(proc.pid)
        proc.wait()
        raise
    if proc.returncode < 0:
        sig = signal.Signals(-proc.returncode).name if -proc.returncode in signal.valid_signals() else proc.returncode
        raise CompileError(f"{func}: iree-compile crashed ({sig})", stderr=(err or "") + (out or ""), command=shown)
    if proc.returncode != 0:
        raise CompileError(f"{func}: iree-compile failed: {first_error(err or out)}", stderr=err or out or "",
                           command=shown)
    return time.perf_counter() - t0
