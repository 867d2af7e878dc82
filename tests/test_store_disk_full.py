"""The results database on a disk that fills up, for real: SQLite writing into a file system that runs out of
space (a small tmpfs, when this process may mount one) or into a process whose file size limit
(RLIMIT_FSIZE) makes every write past it fail, as a full disk does. Nothing of SQLite is mocked.

What must hold: the first write the file cannot take stops the run with ONE line naming the file (no
traceback), the file stays consistent with every result that fit, the exports are still written, and the WAL
stays small however many results a run writes."""
from __future__ import annotations

import csv
import os
import resource
import sqlite3
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from boo_engine.results import DONE, QUEUED, JobResult, Stats
from boo_engine.store import Store

ROOT = Path(__file__).resolve().parents[1]
ENV = {"host": "testhost", "cpu": "Test CPU", "cores_logical": 2}
COMMANDS = [f"gemm -k 16 -m {m} -n 16" for m in (8, 16, 24, 32, 40, 48)]


def result(i: int, status=DONE, n: int = 200) -> JobResult:
    samples = [10.0 + (k % 17) * 0.25 for k in range(n)] if status == DONE else []
    return JobResult(job_id=f"j{i}", command=f"gemm -k 16 -m {i + 1} -n 16", func_name=f"gemm_{i}", op="gemm",
                     variant="baseline", target="cpu", backend="iree", status=status, samples_us=samples,
                     stats=Stats(n=n, min_us=10, max_us=14, mean_us=12, stddev_us=1, median_us=12, p10_us=10,
                                 p90_us=14, iqr_us=1) if status == DONE else None)


def wal_size(db: Path) -> int:
    wal = Path(f"{db}-wal")
    return wal.stat().st_size if wal.exists() else 0


def test_wal_stays_bounded_over_a_20_result_run(tmp_path):
    """As a session writes: every job queued at once, then each final result (1000 samples) and a flush."""
    db = tmp_path / "r.db"
    store = Store(db)
    run = store.start_run(command_line="t", target="cpu", config={}, environment=ENV)
    for i in range(20):
        store.record_result(run, result(i, QUEUED))
    store.flush()
    sizes = [wal_size(db)]
    for i in range(20):
        store.record_result(run, result(i, n=1000))
        store.flush()
        sizes.append(wal_size(db))
    store.finish_run(run, "done")
    store.flush()
    sizes.append(wal_size(db))
    print(f"WAL after the 20 results: {sizes[-1]} bytes, largest {max(sizes)} bytes")
    assert max(sizes) <= 256 * 1024, sizes
    store.close()
    assert len(store.load_results(run)) == 20


STORE_SCRIPT = textwrap.dedent("""
    import resource, sys
    sys.path.insert(0, sys.argv[2])
    from tests.test_store_disk_full import result
    from boo_engine.results import QUEUED
    from boo_engine.store import Store, StoreWriteError

    told = []
    store = Store(sys.argv[1], on_failure=told.append)
    run = store.start_run(command_line="t", target="cpu", config={}, environment={"host": "h"})
    limit = int(sys.argv[3])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    written = 0
    try:
        for i in range(200):
            store.record_result(run, result(i, QUEUED))
            store.record_result(run, result(i))
            store.flush()
            written += 1
        print("never failed")
    except StoreWriteError as e:
        print(f"STORED {e.stored} WRITTEN {written} TOLD {len(told)}")
        print(f"LINE {e}")
    store.close()   # the failure was handed to on_failure: close() does not raise it again
    print("CLOSED")
""")


def test_a_file_size_limit_stops_the_store_with_one_line_and_a_consistent_file(tmp_path):
    db = tmp_path / "r.db"
    Store(db).close()
    limit = db.stat().st_size + 48 * 1024
    p = subprocess.run([sys.executable, "-c", STORE_SCRIPT, str(db), str(ROOT), str(limit)], capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    assert "CLOSED" in p.stdout, p.stdout
    lines = dict(line.split(" ", 1) for line in p.stdout.splitlines() if " " in line)
    stored, written, told = (int(x) for x in lines["STORED"].split()[::2])
    assert told == 1, p.stdout
    assert 0 < written <= stored <= written + 1 < 200, p.stdout   # the last commit may be what failed to checkpoint
    assert f"the results database at {db} cannot be written" in lines["LINE"], p.stdout
    assert f"{stored} results stored" in lines["LINE"]
    con = sqlite3.connect(db)
    assert con.execute("pragma integrity_check").fetchone()[0] == "ok"
    # each result's transaction landed whole, or not at all: the ones reported stored, with all their samples
    assert con.execute("select count(*) from results where status = 'done'").fetchone()[0] == stored
    assert con.execute("select count(*) from samples").fetchone()[0] == 200 * stored


# ---- a headless run, end to end -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """A kernel cache filled once for the module (the runs below must not compile: only the DB's disk fills)."""
    e = dict(os.environ)
    e["BOO_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    e.pop("BOO_DB", None)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    work = tmp_path_factory.mktemp("warm")
    (work / "cmds.txt").write_text("\n".join(COMMANDS) + "\n")
    p = boo_tui(["cmds.txt", "--iter", "20", "--db", "warm.db", "--export", "warm.csv"], e, work)
    assert p.returncode == 0, p.stderr
    return e


def boo_tui(args, env, cwd, fsize: int | None = None):
    def limit() -> None:
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run([sys.executable, "-m", "boo_tui", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=600, preexec_fn=limit)


def small_tmpfs(where: Path, free_kib: int):
    """A 1 MiB tmpfs holding an empty results database and a ballast file leaving `free_kib` free; None when
    this process may not mount one."""
    where.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", f"boo-{uuid.uuid4().hex[:8]}",
                                            str(where)], capture_output=True).returncode != 0:
        return None
    Store(where / "r.db").close()
    st = os.statvfs(where)
    ballast = st.f_bavail * st.f_frsize - free_kib * 1024
    (where / "ballast").write_bytes(b"\0" * max(0, ballast))
    return where


@pytest.mark.parametrize("fault", ["file-size-limit", "full-tmpfs"])
def test_headless_run_on_a_full_disk_stops_with_one_line(env, tmp_path, fault):
    (tmp_path / "cmds.txt").write_text("\n".join(COMMANDS) + "\n")
    fsize = None
    if fault == "full-tmpfs":
        mnt = small_tmpfs(tmp_path / "mnt", free_kib=140)
        if mnt is None:
            pytest.skip("cannot mount a tmpfs here (the file-size-limit case covers it)")
        db = mnt / "r.db"
    else:
        db = tmp_path / "r.db"
        Store(db).close()
        fsize = db.stat().st_size + 24 * 1024
    try:
        p = boo_tui(["cmds.txt", "--iter", "200", "--no-best", "--db", str(db), "--export", "r.csv"], env, tmp_path,
                    fsize)
        assert p.returncode == 1, p.stderr
        assert "Traceback" not in p.stderr, p.stderr
        said = [line for line in p.stderr.splitlines() if "cannot be written" in line]
        assert len(said) == 1, p.stderr
        assert f"the results database at {db} cannot be written" in said[0], said
        assert "run --resume" in said[0]
        rows = list(csv.DictReader(open(tmp_path / "r.csv")))
        assert len(rows) == 12
        done = [r for r in rows if r["status"] == "done"]
        assert {r["status"] for r in rows} <= {"done", "interrupted"}, rows   # never "failed": not measured
        con = sqlite3.connect(db)
        assert con.execute("pragma integrity_check").fetchone()[0] == "ok"
        stored = con.execute("select count(*) from results where status = 'done'").fetchone()[0]
        con.close()
        assert 0 < stored <= len(done) < 12, (stored, len(done))
        assert f"{stored} results stored" in said[0]
    finally:
        if fault == "full-tmpfs":
            subprocess.run(["umount", str(tmp_path / "mnt")], check=False)
