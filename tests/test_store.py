"""The results store on real SQLite files: round trips, upserts, WAL, migrations, crash safety, concurrency."""
from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from boo_engine.results import (
    COMPILING,
    DONE,
    FAILED,
    INTERRUPTED,
    MEASURING,
    QUEUED,
    CompileInfo,
    JobResult,
    NumericsInfo,
    Stats,
)
from boo_engine.store import Store, StoreError, default_db_path
from boo_engine.store.write_items import Flush, RegisterCommand, Stop, WriteResult, coalesce

ENV = {"host": "testhost", "cpu": "Test CPU", "cores_logical": 2, "iree_compile_version": "IREE compiler version 9",
       "torch_version": "2.x", "gpu": None}


def full_result(job_id: str = "j1", n: int = 7, **kw) -> JobResult:
    """A JobResult with EVERY field set to a non-default value."""
    samples = [10.0 + i * 0.25 for i in range(n)]
    r = JobResult(
        job_id=job_id,
        command="conv -n 1 -c 8 -H 16 -W 16 -k 4 -y 3 -x 3",
        func_name="conv_2d_float32_forward_1x8x16x16_nchw_4x8x3x3_fchw_nfhw_1x1s_1x1p_1x1d_1g",
        op="conv",
        variant="tuned",
        target="cpu",
        backend="iree",
        status=DONE,
        error="a warning kept even on success",
        source="cmds.txt:3",
        calls=12,
        share=8.31,
        captured_us=456.75,
        stats=Stats(n=n, min_us=10.0, max_us=11.5, mean_us=10.75, stddev_us=0.54, median_us=10.75, p10_us=10.15,
                    p90_us=11.35, iqr_us=0.75, gflops=12.5, gbps=3.25),
        samples_us=samples,
        block_k=8,
        warmup_calls=16,
        noisy=True,
        noise_reason="IQR/median 14% > 10%",
        host_load=0.125,
        cpu_us=[s - 0.125 for s in samples],
        rounds=[n - n // 2, n // 2],
        disturbed=1,
        steal=0.0625,
        numerics=NumericsInfo(verdict="fail", stats={"max_abs": 0.5, "mean_error": -1e-7, "nested": {"a": [1, 2]}}),
        compile=CompileInfo(seconds=1.75, cache_hit=True, command=["iree-compile", "in.mlir", "-o", "out.vmfb"],
                            artifact="/cache/x/out.vmfb", key="abc123", compiler_version="IREE 3.13",
                            num_dispatches=2, error="remark: something", spec_applied=False,
                            build="ours: matmul formulation", chosen_by="tune 3"),
        reproducer="iree-benchmark-module --module=/cache/x/out.vmfb --device=local-sync",
        node="hostA/1a2b3c4d",
        started_at=1763700000.125,
        finished_at=1763700003.5,
    )
    for k, v in kw.items():
        setattr(r, k, v)
    return r


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "sub" / "results.db")
    yield s
    s.close()


def new_run(store: Store, **kw) -> int:
    args = dict(command_line="boo-tui conv -n 1", target="cpu", config={"iters": 100, "variants": ["tuned"]},
                environment=ENV)
    args.update(kw)
    return store.start_run(**args)


def test_full_round_trip_every_field(store):
    run = new_run(store)
    r = full_result()
    store.record_result(run, r)
    store.flush()
    [back] = store.load_results(run)
    assert back == r
    assert back.to_dict() == r.to_dict()


def test_stored_words_come_back_typed_and_foreign_ones_do_not_pass(store):
    """A database may come from someone else: a status, verdict or cache mode outside the vocabulary reads as a
    failed job with no verdict, measured warm, never as text that a comparison with DONE or PASS might miss."""
    from boo_engine.results import CacheMode, NumericsVerdict, Status

    run = new_run(store)
    store.record_result(run, full_result("a"))
    store.record_result(run, full_result("b"))
    store.flush()
    [a, b] = sorted(store.load_results(run), key=lambda r: r.job_id)
    assert type(a.status) is Status and type(a.cache_mode) is CacheMode
    assert a.numerics is not None and type(a.numerics.verdict) is NumericsVerdict
    with sqlite3.connect(store.path) as c:
        c.execute("UPDATE results SET status = 'owned', numerics = 'maybe', cache_mode = 'hot' WHERE job_id = 'b'")
    [_, b] = sorted(Store(store.path).load_results(run), key=lambda r: r.job_id)
    assert b.status is Status.FAILED and b.numerics is None and b.cache_mode is CacheMode.WARM


def test_round_trip_of_a_bare_failed_result(store):
    run = new_run(store)
    r = JobResult(job_id="f", command="gemm --a_w 4", func_name="g", op="gemm", variant="baseline", target="cpu",
                  backend="torch", status=FAILED, error="boom")
    store.record_result(run, r)
    store.flush()
    assert store.load_results(run) == [r]


def test_snapshot_taken_when_queued(store):
    run = new_run(store)
    r = full_result()
    store.record_result(run, r)
    r.samples_us.append(999.0)   # the caller keeps mutating its object: the queued state must not change
    r.status = FAILED
    store.flush()
    [back] = store.load_results(run)
    assert back.status == DONE and 999.0 not in back.samples_us


def test_upsert_queued_progress_final(store, tmp_path):
    run = new_run(store)
    r = JobResult(job_id="j", command="conv -n 1", func_name="f", op="conv", variant="baseline", target="cpu",
                  backend="iree", status=QUEUED)
    store.record_result(run, r)
    store.flush()
    assert [x.status for x in store.load_results(run)] == [QUEUED]
    r.status, r.samples_us = MEASURING, [1.0, 2.0, 3.0]
    r.compile = CompileInfo(seconds=2.0, key="k1")
    store.record_result(run, r)
    store.flush()
    [mid] = store.load_results(run)
    assert mid.status == MEASURING and mid.samples_us == [1.0, 2.0, 3.0] and mid.compile.key == "k1"
    final = full_result(job_id="j", n=5)
    store.record_result(run, final)
    store.flush()
    [back] = store.load_results(run)
    assert back == final
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 1
        assert conn.execute("SELECT COUNT(*) FROM samples").fetchone()[0] == 5   # replaced, not appended
        assert conn.execute("SELECT COUNT(*) FROM kernels").fetchone()[0] == 1   # updated in place
    # a later write without compile info drops the kernel row
    final.compile = None
    store.record_result(run, final)
    store.flush()
    assert store.load_results(run)[0].compile is None
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM kernels").fetchone()[0] == 0


def test_many_updates_of_one_job_collapse_and_keep_the_last(store):
    run = new_run(store)
    r = full_result(n=1)
    for i in range(200):
        r.samples_us = [float(i)] * (i + 1)
        store.record_result(run, r)
    store.flush()
    [back] = store.load_results(run)
    assert back.samples_us == [199.0] * 200


def test_writer_collapses_updates_of_a_job_but_never_across_another_item():
    """Only the last update of a job is written (at its position), and what was queued before a flush or a
    command is written before it."""
    a1, a2, a3 = (WriteResult(1, full_result("a", n=i)) for i in (1, 2, 3))
    b, other_run_a = WriteResult(1, full_result("b")), WriteResult(2, full_result("a"))
    flush, command = Flush(threading.Event()), RegisterCommand("conv", None, None, None)
    assert coalesce([a1, b, other_run_a, a2, flush, a3, command, Stop()]) == [b, other_run_a, a2, flush, a3,
                                                                               command, Stop()]


def test_same_job_id_in_two_runs_are_two_results(store):
    a, b = new_run(store), new_run(store)
    store.record_result(a, full_result(status=DONE))
    store.record_result(b, full_result(status=FAILED))
    store.flush()
    assert store.load_results(a)[0].status == DONE
    assert store.load_results(b)[0].status == FAILED
    assert store.last_run_id() == b


def test_wal_enabled_and_schema_browsable(store):
    new_run(store)
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"runs", "environments", "commands", "variants", "kernels", "results", "samples"} <= tables
        fks = {(r[2], r[3]) for r in conn.execute("PRAGMA foreign_key_list(results)")}
        assert {("runs", "run_id"), ("commands", "command_id"), ("variants", "variant_id"),
                ("kernels", "kernel_id")} <= fks
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_migrations_idempotent(tmp_path):
    path = tmp_path / "r.db"
    with Store(path) as s1:
        run = new_run(s1)
        s1.record_result(run, full_result())
    with Store(path) as s2:   # second open: nothing re-applied, data intact
        assert s2.load_results(run) == [full_result()]
        with sqlite3.connect(path) as conn:
            names = [r[0] for r in conn.execute("SELECT name FROM _sqlite_migrations")]
        assert names == ["m001_initial", "m002_run_owner", "m003_tunes", "m004_weights", "m005_limits", "m006_models",
                         "m007_nodes", "m008_timing_evidence", "m009_captured_us", "m010_builds"]


def test_two_stores_on_one_file_at_once(tmp_path):
    """Two writers (two threads here, two processes in real life) share the file through the busy timeout."""
    path = tmp_path / "shared.db"
    s1, s2 = Store(path), Store(path)
    try:
        r1, r2 = new_run(s1), new_run(s2)
        for i in range(40):
            s1.record_result(r1, full_result(job_id=f"a{i}", n=50))
            s2.record_result(r2, full_result(job_id=f"b{i}", n=50))
        s1.flush()
        s2.flush()
        assert len(s1.load_results(r2)) == 40 and len(s2.load_results(r1)) == 40
    finally:
        s1.close()
        s2.close()


def test_environment_and_variants_deduplicated(store):
    a = new_run(store)
    b = new_run(store)
    c = new_run(store, environment=dict(ENV, host="other"))
    for run in (a, b, c):
        store.register_variant(run, "tuned", flags=["--x"], spec_text="module {}", details={"specs": ["s.mlir"]})
        store.record_result(run, full_result())
    store.register_variant(c, "tuned", flags=["--x"], spec_text="module { changed }")
    store.record_result(c, full_result(job_id="j2"))
    store.flush()
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM environments").fetchone()[0] == 2
        rows = conn.execute("SELECT name, spec_text, spec_hash, flags FROM variants ORDER BY id").fetchall()
        assert len(rows) == 2 and rows[0][1] == "module {}" and json.loads(rows[0][3]) == ["--x"]
        assert rows[0][2] != rows[1][2]
        assert conn.execute("SELECT COUNT(*) FROM commands").fetchone()[0] == 1
    assert {r.variant for r in store.load_results(c)} == {"tuned"}
    assert store.run_info(a)["environment"] == ENV


def test_resumed_run_keeps_its_variant_description(tmp_path):
    path = tmp_path / "r.db"
    with Store(path) as s1:
        run = new_run(s1)
        s1.register_variant(run, "tuned", flags=["--x"], spec_text="module {}")
        s1.record_result(run, full_result(job_id="a"))
    with Store(path) as s2:   # a new process resuming: no register_variant call
        s2.record_result(run, full_result(job_id="b"))
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(DISTINCT variant_id) FROM results").fetchone()[0] == 1
        assert conn.execute("SELECT COUNT(*) FROM variants").fetchone()[0] == 1


def test_register_command_signature(store):
    run = new_run(store)
    store.register_command("conv -n 1 -c 8 -H 16 -W 16 -k 4 -y 3 -x 3", op="conv", func_name="fn",
                           signature={"n": 1, "c": 8})
    store.record_result(run, full_result())
    store.flush()
    with sqlite3.connect(store.path) as conn:
        assert json.loads(conn.execute("SELECT signature FROM commands").fetchone()[0]) == {"n": 1, "c": 8}


def test_runs_listing_info_resume_and_interrupt(store):
    run = new_run(store)
    store.record_result(run, full_result(job_id="ok1"))
    store.record_result(run, full_result(job_id="bad", status=FAILED))
    store.record_result(run, full_result(job_id="comp", status=COMPILING))
    store.record_result(run, full_result(job_id="q", status=QUEUED))
    store.flush()
    [listed] = store.list_runs()
    assert (listed["id"], listed["status"], listed["n_results"], listed["ok"], listed["failed"]) == (run, "running", 4, 1, 1)
    assert listed["config"] == {"iters": 100, "variants": ["tuned"]} and listed["host"] == "testhost"
    assert store.finished_job_ids(run) == {"ok1", "bad"}
    assert store.mark_interrupted(run) == 2
    statuses = {r.job_id: r.status for r in store.load_results(run)}
    assert statuses == {"ok1": DONE, "bad": FAILED, "comp": INTERRUPTED, "q": INTERRUPTED}
    info = store.run_info(run)
    assert info["status"] == "interrupted" and info["finished_at"]
    store.resume_run(run)
    assert store.run_info(run)["status"] == "running" and store.run_info(run)["finished_at"] is None
    store.finish_run(run, "done")
    assert store.run_info(run)["status"] == "done"
    assert store.mark_interrupted(run) == 0 and store.run_info(run)["status"] == "done"   # a finished run stays


def test_bad_calls_are_one_line_errors(store):
    with pytest.raises(StoreError, match="no run 424242"):
        store.run_info(424242)
    with pytest.raises(StoreError, match="no run 424242"):
        store.finish_run(424242, "done")
    with pytest.raises(ValueError, match="not one of"):
        store.finish_run(1, "exploded")
    assert store.last_run_id() is None


def test_writer_errors_surface_on_flush_and_are_logged(store, caplog):
    caplog.set_level(logging.ERROR, logger="boo_engine.store")
    store.record_result(999, full_result())   # no such run: the foreign key rejects it
    with pytest.raises(StoreError, match="write failed"):
        store.flush()
    assert any("FOREIGN KEY" in r.getMessage() for r in caplog.records)
    store.flush()   # reported once; the store keeps working
    run = new_run(store)
    store.record_result(run, full_result())
    store.flush()
    assert len(store.load_results(run)) == 1


def test_error_surfaces_on_close(tmp_path):
    s = Store(tmp_path / "r.db")
    s.record_result(77, full_result())
    with pytest.raises(StoreError):
        s.close()
    with pytest.raises(StoreError, match="closed"):
        s.record_result(77, full_result())


def test_unusable_path_is_a_store_error(tmp_path):
    garbage = tmp_path / "not-a-db.db"
    garbage.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not-a-db.db"):
        Store(garbage)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError):
        Store(blocker / "sub" / "r.db")


def test_default_db_path(monkeypatch, tmp_path):
    monkeypatch.delenv("BOO_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    assert default_db_path() == tmp_path / "boo-results.db"
    monkeypatch.setenv("BOO_DB", str(tmp_path / "elsewhere.db"))
    assert default_db_path() == tmp_path / "elsewhere.db"
    with Store() as s:
        assert s.path == tmp_path / "elsewhere.db" and s.path.exists()


def test_readers_in_other_threads_while_writing(store):
    run = new_run(store)
    errors: list[BaseException] = []
    seen: dict[int, list[int]] = {0: [], 1: []}
    stop = threading.Event()

    def reader(me: int) -> None:
        try:
            while not stop.is_set():
                results = store.load_results(run)
                for r in results:   # every visible result is whole: its stats match its samples
                    assert r.stats.n == len(r.samples_us)
                seen[me].append(len(results))
                store.list_runs()
        except BaseException as e:  # noqa: BLE001 - reported to the main thread
            errors.append(e)

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for i in range(150):
        store.record_result(run, full_result(job_id=f"j{i}", n=200,
                                             stats=Stats(200, 1, 1, 1, 0, 1, 1, 1, 0)))
        if i % 10 == 0:
            time.sleep(0.005)
    store.flush()
    time.sleep(0.05)
    stop.set()
    for t in threads:
        t.join()
    assert not errors, errors
    for counts in seen.values():
        assert counts and counts == sorted(counts)   # a reader never sees the count go backwards
    assert len(store.load_results(run)) == 150


CHILD = textwrap.dedent("""
    import sys
    from boo_engine.results import JobResult, Stats
    from boo_engine.store import Store
    store = Store(sys.argv[1])
    run = store.start_run(command_line="child", target="cpu", config={}, environment={"host": "child"})
    print("run", run, flush=True)
    i = 0
    while True:
        batch = []
        for _ in range(5):
            n = 2000 + (i % 7) * 500   # big: the kill often lands inside a result's write
            r = JobResult(job_id=f"j{i}", command=f"conv -n {i}", func_name="f", op="conv", variant="baseline",
                          target="cpu", backend="iree", status="queued")
            store.record_result(run, r)
            r.status = "done"
            r.samples_us = [float(i) + k * 1e-3 for k in range(n)]
            r.stats = Stats(n, 0, 0, 0, 0, 0, 0, 0, 0)
            store.record_result(run, r)
            batch.append(r.job_id)
            i += 1
        store.flush()
        print("committed", " ".join(batch), flush=True)
""")


def test_results_queued_at_a_normal_exit_are_written(tmp_path):
    """A caller that forgets close(): the atexit hook drains the queue before the interpreter exits."""
    path = tmp_path / "exit.db"
    code = textwrap.dedent("""
        import sys
        from boo_engine.results import JobResult
        from boo_engine.store import Store
        store = Store(sys.argv[1])
        run = store.start_run(command_line="x", target="cpu", config={}, environment={})
        for i in range(50):
            store.record_result(run, JobResult(job_id=f"j{i}", command="c", func_name="f", op="conv",
                                               variant="baseline", target="cpu", backend="iree", status="done",
                                               samples_us=[1.0] * 500))
    """)
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, timeout=60)
    with Store(path) as s:
        results = s.load_results(s.last_run_id())
    assert len(results) == 50 and all(len(r.samples_us) == 500 for r in results)


@pytest.mark.parametrize("delay", [0.0, 0.013, 0.029])
def test_sigkill_mid_stream_leaves_a_consistent_db(tmp_path, delay):
    """A writer process killed with SIGKILL at an arbitrary instant (three different instants) loses nothing it
    reported committed, and leaves no result half-written."""
    path = tmp_path / "killed.db"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, text=True)
    committed: list[str] = []
    try:
        run = int(proc.stdout.readline().split()[1])
        while len(committed) < 20:
            line = proc.stdout.readline()
            assert line, "child died before writing enough results"
            committed += line.split()[1:]
        time.sleep(delay)   # the child is writing the next batches right now
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL

    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    with Store(path) as s:
        info = s.run_info(run)   # the row still says running, but its process is gone: it reads interrupted
        assert (info["stored_status"], info["status"]) == ("running", "interrupted")
        s.mark_interrupted(run)
        results = {r.job_id: r for r in s.load_results(run)}
        assert s.run_info(run)["status"] == "interrupted"
    for job_id in committed:
        r = results[job_id]
        i = int(job_id[1:])
        assert r.status == DONE
        assert r.samples_us == [float(i) + k * 1e-3 for k in range(2000 + (i % 7) * 500)]
    for r in results.values():   # nothing half-written, reported or not
        if r.status == DONE:
            assert r.stats.n == len(r.samples_us)
        else:
            assert r.status == INTERRUPTED and not r.samples_us


# --- property: any JobResult survives the round trip ---------------------------------------------------------

import itertools  # noqa: E402

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_counter = itertools.count()
_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
_opt_text = st.none() | _text
_f = st.floats(allow_nan=False, allow_infinity=False, width=64)
_stats = st.builds(Stats, n=st.integers(0, 10**6), min_us=_f, max_us=_f, mean_us=_f, stddev_us=_f, median_us=_f,
                   p10_us=_f, p90_us=_f, iqr_us=_f, gflops=st.none() | _f, gbps=st.none() | _f)
_json = st.recursive(st.none() | st.booleans() | st.integers(-10**9, 10**9) | _f | _text,
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
                     max_leaves=6)
_compile = st.builds(CompileInfo, seconds=_f, cache_hit=st.booleans(), command=st.lists(_text, max_size=4),
                     artifact=_opt_text, key=_opt_text, compiler_version=_opt_text,
                     num_dispatches=st.none() | st.integers(0, 100), error=_opt_text,
                     spec_applied=st.none() | st.booleans())
_numerics = st.builds(NumericsInfo, verdict=st.sampled_from(["pass", "fail"]),
                      stats=st.dictionaries(_text, _json, max_size=4))
_results = st.builds(
    JobResult, job_id=_text, command=_text, func_name=_text, op=_text, variant=_text, target=_text, backend=_text,
    status=st.sampled_from([QUEUED, COMPILING, MEASURING, DONE, FAILED, INTERRUPTED]), error=_opt_text,
    source=_opt_text, stats=st.none() | _stats, samples_us=st.lists(_f, max_size=50),
    block_k=st.none() | st.integers(1, 10**6), warmup_calls=st.none() | st.integers(0, 10**6),
    noisy=st.booleans(), noise_reason=_opt_text, host_load=st.none() | _f, numerics=st.none() | _numerics,
    compile=st.none() | _compile, reproducer=_opt_text, started_at=st.none() | _f, finished_at=st.none() | _f)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(results=st.lists(_results, min_size=1, max_size=4, unique_by=lambda r: r.job_id))
def test_any_result_round_trips(tmp_path, results):
    """Every field of any JobResult comes back equal. (The op is a property of the command text, stored once
    per command, so it is derived from the text here as it is in real life.)"""
    for r in results:
        r.op = "op:" + r.command
    with Store(tmp_path / f"prop{next(_counter)}.db") as s:
        run = new_run(s)
        for r in results:
            s.record_result(run, r)
        s.flush()
        assert s.load_results(run) == results
