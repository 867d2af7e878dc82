"""The compile pool's guards against a compiler that stops making progress, and its manners towards the UI."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

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


def _alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def _hanging_variant(tmp_path, monkeypatch):
    """A variant whose preprocess step (a real executable on PATH, run by iree-compile as its child) hangs."""
    from boo_engine.variants import Variant

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "boo-test-hanging-preprocess"
    tool.write_text("#!/bin/sh\nsleep 300\ncat\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return Variant(name="hang", preprocess="boo-test-hanging-preprocess")


def _wait_for_the_hang(p, fut) -> list[int]:
    """The processes under the pool's workers once the hanging preprocess step runs."""
    deadline = time.monotonic() + 120
    tree: list[int] = []
    while not any(_cmd(c).startswith("sleep") for c in tree):
        assert time.monotonic() < deadline and not fut.done(), "the preprocess step never started"
        time.sleep(0.05)
        tree = [c for w in p._workers for c in _descendants(w.proc.pid)]
    return tree


def test_cancel_kills_the_compiler_and_everything_it_started(tmp_path, monkeypatch):
    """A real iree-compile whose preprocess step (a child of the compiler) hangs: cancelling the job must kill
    the worker, the compiler and that child, not leave the compiler running on as an orphan."""
    from boo_engine.commands import parse_command

    variant = _hanging_variant(tmp_path, monkeypatch)
    with pool.CompilePool(workers=1, cache=KernelCache(tmp_path / "cache"), timeout_s=600) as p:
        fut = p.submit(parse_command("gemm -k 8 -m 8 -n 8"), "cpu", variant)
        tree = _wait_for_the_hang(p, fut)
        compiler = [c for c in tree if _cmd(c).endswith("iree-compile")]
        assert compiler, f"no iree-compile among {[_cmd(c) for c in tree]}"
        p.cancel_all()
        with pytest.raises(pool.CompileCancelled):
            fut.result(timeout=30)
        time.sleep(0.2)
        assert [(c, _cmd(c)) for c in tree if _alive(c)] == []


def test_a_dump_job_is_killed_on_timeout_like_a_compile(tmp_path, monkeypatch):
    """--dump-dispatches runs as a job of the pool: a dump whose compiler hangs (in its preprocess step, a child
    of iree-compile) fails after the pool's timeout with the compiler AND that child killed and its temporary
    folder removed; the worker lives on, and its next dump writes the dispatch files."""
    import tempfile

    from boo_engine.commands import parse_command
    from boo_engine.variants import DUMP_MANIFEST

    sig = parse_command("gemm -k 8 -m 8 -n 8")
    variant = _hanging_variant(tmp_path, monkeypatch)
    with pool.CompilePool(workers=1, cache=KernelCache(tmp_path / "cache"), timeout_s=6) as p:
        fut = p.submit_dump(sig, "cpu", tmp_path / "dump", variant)
        tree = _wait_for_the_hang(p, fut)
        assert [c for c in tree if _cmd(c).endswith("iree-compile")], [_cmd(c) for c in tree]
        worker = p._workers[0].proc.pid
        with pytest.raises(CompileError, match=f"{sig.func_name}: iree-compile timed out after 6 s"):
            fut.result(timeout=60)
        time.sleep(0.2)
        assert [(c, _cmd(c)) for c in tree if _alive(c)] == []
        assert not list(Path(tempfile.gettempdir()).glob(f"boo-dump-{worker}-*"))
        assert not (tmp_path / "dump" / sig.func_name).exists()

        files = p.submit_dump(sig, "cpu", tmp_path / "dump").result(timeout=300)
        assert p._workers[0].proc.pid == worker  # a timeout fails the job, not the worker
    assert files and all(f.parent == tmp_path / "dump" / sig.func_name for f in files)
    assert (tmp_path / "dump" / sig.func_name / DUMP_MANIFEST).is_file()


def _cmd(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return ""


def _descendants(pid: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    kids.setdefault(int(f.read().rsplit(b")", 1)[1].split()[1]), []).append(int(name))
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out
