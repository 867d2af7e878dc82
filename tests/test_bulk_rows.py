"""The rows of a big commands file stored in bulk (issue 24, item 6): a start() hands the store its new jobs 2,000 at
a time, each as a tuple of its columns, written with a few statements for all of them. Counted, not timed: the
writer's queue items, the snapshots taken, the memory the writer keeps; and the file's content is compared with
what the one-row-at-a-time path writes for the same jobs."""
from __future__ import annotations

import dataclasses
import gc
import sqlite3
import tracemalloc
from pathlib import Path

import pytest

from boo_engine.commands import iter_commands_file
from boo_engine.config import SessionConfig
from boo_engine.results import FAILED, FINAL_STATUSES, QUEUED, JobResult
from boo_engine.session.plan import InputEntry, Plan
from boo_engine.session.recording import RunRecorder
from boo_engine.session.state import SessionState
from boo_engine.store import Store
from boo_engine.store import store as store_module
from boo_engine.store import writer as writer_module
from boo_engine.store.rows import BARE_COLUMNS, bare_row, result_from_bare, result_row
from boo_engine.variants import BASELINE

GOOD = "conv -n 1 -c {c} -H 8 -W 8 -k 4 -y 3 -x 3 -p 1 -q 1"
BAD = "conv -n 1 -c {c} -H x -W 8 -k 4"


def commands_file(tmp_path: Path, n: int) -> Path:
    """n lines: distinct convs, every third a bad line, a repeated line, a weighted one and a bad weight line."""
    lines = [(BAD if i % 3 == 0 else GOOD).format(c=1 + i) for i in range(n)]
    lines += [GOOD.format(c=2), "# boo-tui: calls=3 share=2.5%", GOOD.format(c=3), "# boo-tui: calls=x share=1"]
    path = tmp_path / "lines.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def recorder(db: Path, path: Path) -> tuple[RunRecorder, Plan]:
    """A run of `path`'s lines planned as a session plans them (iree and torch jobs), with a real store."""
    plan = Plan("cpu", ("iree", "torch"))
    for line in iter_commands_file(path):
        plan.add_entry(InputEntry.from_line(line), [BASELINE])
    rec = RunRecorder(Store(db), SessionState(plan, None), SessionConfig(command_line="t"), "cpu")
    rec.start_run({"host": "h"}, [BASELINE])
    return rec, plan


def contents(db: Path) -> dict[str, list]:
    """Every row a run's jobs made, ids left out (commands and variants by their text and name)."""
    con = sqlite3.connect(db)
    cols = [r[1] for r in con.execute("pragma table_info(results)") if r[1] not in ("id", "command_id", "variant_id")]
    out = {
        "results": con.execute(f"select {', '.join('r.' + c for c in cols)}, c.text, v.name from results r"
                               " join commands c on c.id = r.command_id join variants v on v.id = r.variant_id"
                               " order by r.id").fetchall(),
        "commands": con.execute("select text, op, func_name, signature from commands order by id").fetchall(),
        "samples": con.execute("select count(*) from samples").fetchall(),
        "kernels": con.execute("select count(*) from kernels").fetchall(),
    }
    con.close()
    return out


def test_new_rows_go_in_bulk_and_the_file_holds_what_row_by_row_writes(tmp_path, monkeypatch):
    """3,000 lines (2,000 good ones, two jobs each, 1,000 bad ones): a handful of queue items and no snapshot,
    where each row was an item and a snapshot; the file's rows are those the one-by-one path writes."""
    path = commands_file(tmp_path, 3000)
    items: list[object] = []
    snapshots = []
    put = writer_module.WriterThread.put
    monkeypatch.setattr(writer_module.WriterThread, "put", lambda self, item: (items.append(item), put(self, item)))
    snap = store_module._snapshot
    monkeypatch.setattr(store_module, "_snapshot", lambda r: (snapshots.append(r), snap(r))[1])

    bulk, plan = recorder(tmp_path / "bulk.db", path)
    jobs = list(plan.jobs.values())
    items.clear()
    bulk.record_many(jobs)
    bulk.store.close()
    print(f"{len(jobs)} rows: {len(items)} queue items, {len(snapshots)} snapshots")
    assert len(jobs) == 5005
    assert len(items) <= 5 and not snapshots, (len(items), len(snapshots))

    one_by_one, plan2 = recorder(tmp_path / "rows.db", path)
    for job in plan2.jobs.values():
        one_by_one.record(job)
    one_by_one.store.close()
    assert len(snapshots) == len(jobs)   # (the path compared with: a snapshot and an item per row)
    got, want = contents(tmp_path / "bulk.db"), contents(tmp_path / "rows.db")
    assert len(got["results"]) == len(jobs)
    assert got == want


def test_a_row_the_run_has_already_is_written_as_one_by_one_would(tmp_path):
    """Bulk rows are plain INSERTs: a job whose row exists (a second start, a resumed run) makes the writer write
    that batch one row at a time (an upsert), so the row ends as the caller said, and nothing is lost."""
    store = Store(tmp_path / "r.db")
    run = store.start_run(command_line="t", target="cpu", config={}, environment={"host": "h"})
    rows = [JobResult(job_id=f"j{i}", command=GOOD.format(c=i), func_name=f"f{i}", op="conv", variant="baseline",
                      target="cpu", backend="iree", status=QUEUED) for i in range(10)]
    store.record_new(run, rows)
    store.flush()
    again = [dataclasses.replace(r, status=FAILED, error="e", finished_at=1.0) if i % 2 else r
             for i, r in enumerate(rows)]
    store.record_new(run, again + [dataclasses.replace(rows[0], job_id="new")])
    store.close()
    back = {r.job_id: r for r in store.load_results(run)}
    assert [back[r.job_id].status for r in again] == [r.status for r in again]
    assert back["j1"].error == "e" and back["j1"].finished_at == 1.0
    assert len(back) == 11


def test_a_bare_row_is_the_row_result_row_makes():
    """`bare_row` reads a result's fields directly (2 us, not a whole row's dict): a result it takes has exactly
    its columns set in `result_row`, and any field outside them makes the result no bare one."""
    queued = JobResult(job_id="j", command="c", func_name="f", op="conv", variant="v", target="cpu", backend="iree",
                       status=QUEUED, source="f.txt:1", calls=3, share=1.5, noisy=True, started_at=2.0)
    bare = bare_row(queued)
    assert bare is not None
    row = result_row(queued)
    assert bare == ("c", "conv", "v", *(row[k] for k in BARE_COLUMNS))
    assert all(v is None for k, v in row.items() if k not in BARE_COLUMNS)
    assert result_row(result_from_bare(bare)) == row
    from tests.test_store import full_result

    full = full_result("j")
    for field in dataclasses.fields(JobResult):   # every field, set alone to what a measured result holds
        one = dataclasses.replace(queued, **{field.name: getattr(full, field.name)})
        taken = bare_row(one) is not None
        outside = any(v is not None for k, v in result_row(one).items() if k not in BARE_COLUMNS)
        assert taken != (outside or bool(one.samples_us or one.cpu_us or one.compile)), field.name


def test_the_writer_counts_what_it_stored_without_keeping_a_row_each(tmp_path):
    """The count a failure reports ("N results stored") took a set entry per final row (160 bytes: 32 MB for
    200,000 bad lines); what the writer keeps after storing 16,000 final rows is what it keeps after 2,000."""
    def kept_by_writer(n: int) -> int:
        store = Store(tmp_path / f"{n}.db")
        run = store.start_run(command_line="t", target="cpu", config={}, environment={"host": "h"})
        rows = [JobResult(job_id=f"{i:06d}", command=BAD.format(c=1), func_name="", op="conv", variant="-",
                          target="cpu", backend="-", status=FAILED, error="bad") for i in range(n)]
        store.flush()
        # only what the store's own code allocated: inside the whole suite, threads other tests left behind
        # allocate beside this one (400 kB once in CI), and the process-wide traced total counted them
        mine = [tracemalloc.Filter(True, str(Path(store_module.__file__).parent / "*"))]
        tracemalloc.start()
        try:
            before = tracemalloc.take_snapshot().filter_traces(mine)
            for r in rows:
                store.record_result(run, r)
            store.flush()
            gc.collect()   # the batches' garbage (up to ~400 kB, however many rows) is not what the writer keeps
            after = tracemalloc.take_snapshot().filter_traces(mine)
        finally:
            tracemalloc.stop()
        kept = sum(d.size_diff for d in after.compare_to(before, "filename"))
        assert store._writer._stored == n
        store.close()
        return kept

    small, large = kept_by_writer(2000), kept_by_writer(16000)
    print(f"kept by the writer: {small / 1e3:.0f} kB after 2,000 rows, {large / 1e3:.0f} kB after 16,000")
    assert large - small < 800_000, (small, large)   # (a set entry a row: 2.2 MB more)


@pytest.mark.parametrize("rerun", [False, True])
def test_the_count_is_one_per_job_however_often_it_is_written(tmp_path, rerun):
    """A job measured again (final, queued, final) counts once, as when the writer remembered each job."""
    store = Store(tmp_path / "r.db")
    run = store.start_run(command_line="t", target="cpu", config={}, environment={"host": "h"})
    import time

    r = JobResult(job_id="j", command=GOOD.format(c=1), func_name="f", op="conv", variant="baseline", target="cpu",
                  backend="iree", status=QUEUED)
    store.record_new(run, [r])
    for status in ([FAILED, QUEUED, FAILED] if rerun else [FAILED, FAILED]):
        r = dataclasses.replace(r, status=status, finished_at=time.time() if status in FINAL_STATUSES else None)
        store.record_result(run, r)
        store.flush()   # (one drain would keep the last write only)
    store.close()
    assert store._writer._stored == 1
