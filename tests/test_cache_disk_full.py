"""The kernel cache on a disk that takes no more writes, for real: iree-compile and Python writing into a small
full tmpfs (when this process may mount one) or under a file size limit (RLIMIT_FSIZE: iree-compile dies of
SIGXFSZ, Python gets EFBIG). Nothing of the compiler or the cache is mocked.

What must hold: the compile fails with ONE line naming the cache and the reason (not "iree-compile crashed
(SIGXFSZ)" or an errno), no traceback, no half-written entry or staging folder left; a cached kernel still
measures; a run where nothing can be stored stops with that one line."""
from __future__ import annotations

import csv
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HIT, MISS = "gemm -k 16 -m 8 -n 16", "gemm -k 16 -m 24 -n 16"

COMPILE_SCRIPT = textwrap.dedent("""
    import resource, sys
    sys.path.insert(0, sys.argv[2])
    from boo_engine.commands import parse_invocation
    from boo_engine.compile.build import compile_signature
    from boo_engine.compile.cache import KernelCache
    from boo_engine.errors import CompileError

    cache = KernelCache(sys.argv[1])
    cache.compiler_version  # read (and remembered) before the limit
    limit = int(sys.argv[3])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        compile_signature(parse_invocation(sys.argv[4]).signature, "cpu", cache=cache)
        print("COMPILED")
    except CompileError as e:
        print(f"LINE {e}")
""")


def leftovers(root: Path) -> list[str]:
    """Staging / trash folders and entry folders (anything below a kernel's folder but its .mlir and lock)."""
    return sorted(str(p.relative_to(root)) for f in root.iterdir() if f.is_dir() and not f.name.startswith(".")
                  for p in f.iterdir() if p.is_dir())


def test_a_file_size_limit_fails_the_compile_with_one_line_naming_the_cache(tmp_path):
    cache = tmp_path / "cache"
    p = subprocess.run([sys.executable, "-c", COMPILE_SCRIPT, str(cache), str(ROOT), "6000", MISS],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    line = next(x for x in p.stdout.splitlines() if x.startswith("LINE "))
    assert line == (f"LINE cannot store the kernel in the cache at {cache.resolve()}: file too large "
                    "(raise the file size limit, ulimit -f, or use --cache-dir)"), p.stdout
    assert leftovers(cache) == []


def small_full_tmpfs(where: Path) -> Path | None:
    """A mounted 1 MiB tmpfs; None when this process may not mount one."""
    where.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", f"boo-{uuid.uuid4().hex[:8]}",
                                            str(where)], capture_output=True).returncode != 0:
        return None
    return where


def fill(where: Path) -> None:
    st = os.statvfs(where)
    with open(where / f"ballast-{uuid.uuid4().hex[:6]}", "wb") as f:
        try:
            f.write(b"\0" * (st.f_bavail * st.f_frsize))
        except OSError:
            pass


def boo_tui(args, env, cwd):
    return subprocess.run([sys.executable, "-m", "boo_tui", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture
def full_cache(tmp_path):
    mnt = small_full_tmpfs(tmp_path / "mnt")
    if mnt is None:
        pytest.skip("cannot mount a tmpfs here (the file-size-limit case covers the compile)")
    env = dict(os.environ)
    env["BOO_CACHE_DIR"] = str(mnt / "cache")
    env.pop("BOO_DB", None)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    try:
        yield mnt, env
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_a_run_where_nothing_can_be_stored_stops_with_one_line(full_cache, tmp_path):
    mnt, env = full_cache
    fill(mnt)
    (tmp_path / "cmds.txt").write_text(f"{HIT}\n{MISS}\n")
    p = boo_tui(["cmds.txt", "--iter", "20", "--backend", "iree", "--no-best", "--db", "r.db", "--export", "r.csv"], env,
                tmp_path)
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    said = [x for x in p.stderr.splitlines() if "cannot store the kernel" in x]
    assert len(said) == 1, p.stderr
    assert f"cannot store the kernel in the cache at {mnt / 'cache'}: disk full (free space or use --cache-dir)" \
        in said[0]
    assert "SIGXFSZ" not in p.stderr and "Errno" not in p.stderr, p.stderr
    rows = list(csv.DictReader(open(tmp_path / "r.csv")))
    assert {r["status"] for r in rows} <= {"failed", "interrupted"} and "failed" in {r["status"] for r in rows}
    assert leftovers(mnt / "cache") == []


def test_a_cached_kernel_still_measures_when_a_new_one_cannot_be_stored(full_cache, tmp_path):
    mnt, env = full_cache
    (tmp_path / "cmds.txt").write_text(f"{HIT}\n{MISS}\n")
    warm = boo_tui([HIT, "--iter", "20", "--backend", "iree", "--no-best", "--db", "w.db", "--export", "w.csv"], env, tmp_path)
    assert warm.returncode == 0, warm.stderr
    fill(mnt)
    p = boo_tui(["cmds.txt", "--iter", "20", "--backend", "iree", "--no-best", "--db", "r.db", "--export", "r.csv"], env,
                tmp_path)
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    rows = {r["command"]: r for r in csv.DictReader(open(tmp_path / "r.csv"))}
    assert rows[HIT]["status"] == "done", rows
    assert rows[MISS]["status"] == "failed", rows
    assert rows[MISS]["error"].startswith(f"cannot store the kernel in the cache at {mnt / 'cache'}: disk full")
    said = [x for x in p.stderr.splitlines() if "cannot store the kernel" in x]
    assert len(said) == 1, p.stderr
    entries = leftovers(mnt / "cache")
    assert len(entries) == 1, entries   # the warm kernel's entry, nothing of the failed compile
