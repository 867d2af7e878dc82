"""A clean exit prints nothing of the machinery's: no nanobind leak report, no resource-tracker warning."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest


def test_no_nanobind_leak_report_when_the_runtime_is_alive_at_exit():
    """The dashboard freezes the GC (boo_tui/process.py), so IREE's runtime objects are alive when the interpreter
    ends: nanobind listed each of them, ~256 lines after every quit."""
    pytest.importorskip("iree.runtime")
    code = "import gc, boo_engine, iree.runtime; gc.freeze()"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "nanobind" not in p.stderr and "leaked" not in p.stderr, p.stderr[:2000]


def test_a_run_that_compiled_ends_without_a_semaphore_warning(tmp_path):
    """A headless run that compiles a kernel (its export in a compile worker: torch.export's tqdm bar made a
    multiprocessing lock there, never unregistered as the pool kills its workers) ended with `resource_tracker:
    There appear to be 1 leaked semaphore objects to clean up at shutdown`."""
    env = {**os.environ, "BOO_CACHE_DIR": str(tmp_path / "cache")}
    p = subprocess.run([sys.executable, "-m", "boo_tui", "gemm -m 8 -n 8 -k 8", "--headless", "--iter", "5",
                        "--db", str(tmp_path / "r.db")], capture_output=True, text=True, timeout=600, env=env,
                       cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "leaked semaphore" not in p.stderr and "resource_tracker:" not in p.stderr, p.stderr[-2000:]
