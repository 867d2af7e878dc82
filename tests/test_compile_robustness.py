"""The compile pool's guards against a compiler that stops making progress, and its manners towards the UI."""
from __future__ import annotations

import os
import sys
import time

import pytest

from boo_engine.compile import pool
from boo_engine.compile.cache import KernelCache
from boo_engine.errors import CompileError


def test_a_compiler_that_stops_making_progress_is_killed_and_retried():
    # `sleep` uses no CPU, exactly like the deadlocked iree-compile seen once (threads parked on a futex).
    t0 = time.monotonic()
    with pytest.raises(CompileError, match="no progress for 1 s.*killed 2 times"):
        pool._run_compiler(["sleep", "60"], ["sleep", "60"], "k", timeout_s=100, stall_s=1.0, retries=1)
    assert time.monotonic() - t0 < 20, "a stalled compile must not wait for the full timeout"


def test_a_busy_compiler_is_never_taken_for_a_stalled_one():
    busy = [sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 3.5: pass"]
    seconds = pool._run_compiler(busy, busy, "k", timeout_s=100, stall_s=1.0, retries=0)
    assert seconds >= 3.5


def test_compile_workers_run_at_lower_priority(tmp_path):
    with pool.CompilePool(workers=1, prestart=True, cache=KernelCache(tmp_path)) as p:
        deadline = time.monotonic() + 30
        pid = None
        while time.monotonic() < deadline:
            workers = [w for w in p._workers if w.proc.pid]
            if workers:
                pid = workers[0].proc.pid
                if os.getpriority(os.PRIO_PROCESS, pid) == os.getpriority(os.PRIO_PROCESS, 0) + pool.COMPILE_NICENESS:
                    break
            time.sleep(0.1)
        assert pid is not None
        assert os.getpriority(os.PRIO_PROCESS, pid) == os.getpriority(os.PRIO_PROCESS, 0) + pool.COMPILE_NICENESS
