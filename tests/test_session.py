"""Session: the orchestrator both front ends drive. Real compiles, real worker process, real SQLite file."""
from __future__ import annotations

import itertools
import sqlite3
import threading
import time

import pytest

from boo_engine import events as ev
from boo_engine.errors import CommandError
from boo_engine.session import Session, SessionConfig
from boo_engine.variants import BASELINE, Variant

GEMM = "gemm -k 16 -m 32 -n 16"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cache"))


class Recorder:
    def __init__(self):
        self.events: list[tuple[float, ev.Event]] = []
        self.lock = threading.Lock()

    def __call__(self, event):
        with self.lock:
            self.events.append((time.monotonic(), event))

    def of(self, kind):
        with self.lock:
            return [(t, e) for t, e in self.events if isinstance(e, kind)]


def make(tmp_path, cache_dir, listener=None, **kw):
    kw.setdefault("backends", ("iree",))
    kw.setdefault("verify_numerics", False)
    cfg = SessionConfig(target="cpu", db_path=str(tmp_path / "r.db"), cache_dir=cache_dir, **kw)
    return Session(cfg, listener=listener)


def test_events_and_streaming_cadence(tmp_path, cache_dir):
    rec = Recorder()
    with make(tmp_path, cache_dir, rec, min_time_s=1.5, iters=10, verify_numerics=True) as s:
        (job,) = s.add_command(GEMM)
        s.start()
        assert s.wait(timeout=240)
        result = s.jobs[job.job_id]
        assert result.status == "done", result.error
        assert result.numerics is not None and result.numerics.verdict == "pass"
    statuses = [e.status for _, e in rec.of(ev.JobStatus)]
    assert "compiling" in statuses or "cached" in statuses
    assert "measuring" in statuses
    batches = rec.of(ev.SamplesAdded)
    assert sum(len(e.samples_us) for _, e in batches) == len(result.samples_us)
    times = [t for t, _ in batches]
    span = times[-1] - times[0]
    assert span > 1.0
    assert (len(times) - 1) / span >= 5, f"{len(times)} batches over {span:.2f} s"
    assert [type(e) for _, e in rec.events][-1] is ev.RunFinished
    assert len(rec.of(ev.JobFinished)) == 1


def test_variants_are_measured_interleaved(tmp_path, cache_dir):
    rec = Recorder()
    variant = Variant(name="o1", flags=("--iree-opt-level=O1",))
    with make(tmp_path, cache_dir, rec, variants=[BASELINE, variant], iters=20, rounds=4) as s:
        jobs = s.add_command(GEMM)
        assert [j.variant for j in jobs] == ["baseline", "o1"]
        s.start()
        assert s.wait(timeout=240)
        assert all(s.jobs[j.job_id].status == "done" for j in jobs), [s.jobs[j.job_id].error for j in jobs]
        assert all(len(s.jobs[j.job_id].samples_us) == 20 for j in jobs)
    order = [e.job_id for _, e in rec.of(ev.SamplesAdded)]
    runs = [job for job, _ in itertools.groupby(order)]
    # 4 rounds, the order rotating each round (A B | B A | A B | B A): A, B, A, B, A once adjacent rounds merge
    assert runs == [jobs[0].job_id, jobs[1].job_id] * 2 + [jobs[0].job_id], runs
    assert all(s.jobs[j.job_id].rounds == [5] * 4 for j in jobs)


def test_bad_command_is_a_clear_error(tmp_path, cache_dir):
    with make(tmp_path, cache_dir) as s:
        with pytest.raises(CommandError, match="--bogus"):
            s.add_command("gemm --bogus 3")


def test_cancel_and_close_mid_run_leave_a_consistent_db(tmp_path, cache_dir):
    rec = Recorder()
    s = make(tmp_path, cache_dir, rec, min_time_s=30, max_time_s=30, iters=1000)
    (a,) = s.add_command(GEMM)
    (b,) = s.add_command("gemm -k 16 -m 16 -n 16")
    s.start()
    deadline = time.time() + 120
    while s.jobs[a.job_id].status != "measuring" and time.time() < deadline:
        time.sleep(0.05)
    assert s.jobs[a.job_id].status == "measuring"
    t0 = time.monotonic()
    s.cancel([a.job_id])
    while s.jobs[a.job_id].status == "measuring" and time.monotonic() - t0 < 5:
        time.sleep(0.02)
    assert s.jobs[a.job_id].status == "cancelled"
    assert time.monotonic() - t0 < 3, "cancel must stop a measurement quickly"
    while s.jobs[b.job_id].status != "measuring" and time.time() < deadline:
        time.sleep(0.05)
    t0 = time.monotonic()
    s.close()  # mid-measurement: the job and the run are marked interrupted
    assert time.monotonic() - t0 < 15
    con = sqlite3.connect(tmp_path / "r.db")
    assert con.execute("pragma integrity_check").fetchone()[0] == "ok"
    assert con.execute("select status from runs").fetchone()[0] == "interrupted"
    statuses = dict(con.execute("select job_id, status from results").fetchall())
    assert statuses == {a.job_id: "cancelled", b.job_id: "interrupted"}


def test_a_run_with_jobs_never_measured_is_interrupted_not_done(tmp_path, cache_dir):
    """A run whose 2 jobs were never measured read `done`; --resume measures them."""
    s = make(tmp_path, cache_dir, iters=10)
    (a,) = s.add_command(GEMM)
    (b,) = s.add_command("gemm -k 16 -m 16 -n 16")
    s.start([a.job_id])                       # only the first: the second stays queued
    assert s.wait(300)
    s.close()
    con = sqlite3.connect(tmp_path / "r.db")
    assert con.execute("select status from runs").fetchone()[0] == "interrupted"
    assert dict(con.execute("select job_id, status from results").fetchall()) == {a.job_id: "done",
                                                                                   b.job_id: "interrupted"}
    con.close()
    whole = make(tmp_path / "whole", cache_dir, iters=10)
    whole.add_command(GEMM)
    whole.start()
    assert whole.wait(300)
    whole.close()
    con = sqlite3.connect(tmp_path / "whole" / "r.db")
    assert con.execute("select status from runs").fetchone()[0] == "done"
    con.close()
