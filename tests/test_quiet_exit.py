"""A clean exit prints nothing of the machinery's: no nanobind leak report, no resource-tracker warning."""
from __future__ import annotations

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
