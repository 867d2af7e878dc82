"""The engine is a library with three front ends; it must never depend on the UI toolkit."""
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_engine_never_imports_textual():
    exe = shutil.which("lint-imports")
    cmd = [exe] if exe else [sys.executable, "-m", "importlinter.cli"]
    proc = subprocess.run(cmd + ["--config", str(ROOT / "pyproject.toml")], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "KEPT" in proc.stdout and "BROKEN" not in proc.stdout, proc.stdout
