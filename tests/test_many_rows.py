"""A commands file of many lines, planned and stored (issue 24): the work per row must not grow with the rows
already there, and what waits in memory to be stored must not grow with the file.

Measured by what SQLite itself executes (its virtual machine's instruction count, from a progress handler on the
writer's real connection) and by the statements and commits it runs, not by the clock: storing 20,000 failed rows
took 181 s because each one's variant was looked up by reading every row of the run stored before it."""
from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import pytest

from boo_engine.commands import read_commands_file
from boo_engine.results import FAILED, JobResult
from boo_engine.session.plan import InputEntry, Plan, job_id
from boo_engine.store import Store
from boo_engine.store import writer as writer_module
from boo_engine.variants import BASELINE

try:
    from boo_engine.store import sql as sql_module
except ImportError:   # before the writer's SQL had a module of its own
    sql_module = None

ROOT = Path(__file__).resolve().parents[1]
VM_STEP = 1000   # the progress handler runs once per this many SQLite VM instructions


def failed_row(i: int) -> JobResult:
    """A bad line's row, as a session stores it (variant `-`, which the run never registers)."""
    return JobResult(job_id=f"{i:08d}", command=f"conv -n 1 -c {i} -H x{i}", func_name="", op="conv", variant="-",
                     target="cpu", backend="-", status=FAILED, error=f"lines.txt:{i}: conv: -H expects an integer",
                     source=f"lines.txt:{i}")


class Traced:
    """The writer's real connection, watched: the statements it runs and its VM instructions (in VM_STEP units)."""

    def __init__(self, monkeypatch) -> None:
        self.statements: list[str] = []
        self.steps = 0
        for module in (writer_module, sql_module):   # wherever the write connection is opened
            if module is not None and hasattr(module, "connect"):
                monkeypatch.setattr(module, "connect", self.connect)

    def connect(self, path):
        from boo_engine.store.connection import connect

        conn = connect(path)
        conn.set_trace_callback(self.statements.append)
        conn.set_progress_handler(self._step, VM_STEP)
        return conn

    def _step(self) -> int:
        self.steps += 1
        return 0

    def count(self, prefix: str) -> int:
        return sum(1 for s in self.statements if s.lstrip().upper().startswith(prefix))


def store_failed_rows(tmp_path, monkeypatch, n: int) -> Traced:
    """n failed rows stored through the real Store into a fresh file, as `boo-tui` stores a file's bad lines."""
    traced = Traced(monkeypatch)
    store = Store(tmp_path / f"{n}.db")
    run = store.start_run(command_line="t", target="cpu", config={}, environment={"host": "h"})
    traced.statements.clear()
    traced.steps = 0
    for i in range(n):
        store.record_result(run, failed_row(i))
    store.close()
    con = sqlite3.connect(tmp_path / f"{n}.db")
    assert con.execute("select count(*) from results where status = 'failed'").fetchone()[0] == n
    con.close()
    return traced


def test_storing_a_row_costs_the_same_however_many_rows_the_run_has(tmp_path, monkeypatch):
    """The SQLite work per row at 4,000 rows is that at 1,000 (within a B-tree's log factor): it grew 4x when each
    row's variant lookup read the run's every row."""
    small = store_failed_rows(tmp_path, monkeypatch, 1000).steps / 1000
    large = store_failed_rows(tmp_path, monkeypatch, 4000).steps / 4000
    print(f"SQLite VM instructions per row: {small * VM_STEP:.0f} at 1,000 rows, {large * VM_STEP:.0f} at 4,000")
    assert large < 1.5 * small, (small, large)


def test_rows_are_written_in_few_transactions_and_few_statements_each(tmp_path, monkeypatch):
    """5,000 rows queued at once: a handful of commits (each may checkpoint the WAL, an fsync: one per row was a
    third of the time), and at most 4 statements per row (its command, its old version, the upsert; the variant
    once per run)."""
    traced = store_failed_rows(tmp_path, monkeypatch, 5000)
    commits = traced.count("COMMIT")
    per_row = (len(traced.statements) - traced.count("PRAGMA")) / 5000
    print(f"{commits} commits, {per_row:.2f} statements per row")
    assert commits <= 50, commits
    assert per_row <= 4, per_row


def test_rows_waiting_to_be_stored_are_bounded(tmp_path):
    """A caller queueing rows faster than the file takes them waits for the writer: the snapshots waiting in memory
    are as many for 20,000 rows as for 5,000 (they were every row of the file)."""
    def peak_while_queueing(n: int) -> int:
        store = Store(tmp_path / f"q{n}.db")
        run = store.start_run(command_line="t", target="cpu", config={}, environment={"host": "h"})
        rows = [failed_row(i) for i in range(n)]   # the caller's own records: made before the measurement
        tracemalloc.start()
        try:
            for r in rows:
                store.record_result(run, r)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        store.close()
        return peak

    small, large = peak_while_queueing(5000), peak_while_queueing(20000)
    print(f"peak memory while queueing: {small / 1e6:.1f} MB for 5,000 rows, {large / 1e6:.1f} MB for 20,000")
    assert large < 2 * small, (small, large)


FULL_DISK_SCRIPT = textwrap.dedent("""
    import resource, sys
    sys.path.insert(0, sys.argv[2])
    from tests.test_many_rows import failed_row
    from boo_engine.store import Store, StoreWriteError

    store = Store(sys.argv[1], on_failure=lambda e: print("TOLD", flush=True))
    run = store.start_run(command_line="t", target="cpu", config={}, environment={"host": "h"})
    limit = int(sys.argv[3])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    for i in range(30000):   # far more than fit, queued without waiting for any
        store.record_result(run, failed_row(i))
    print("QUEUED", flush=True)
    store.close()
    print("CLOSED", flush=True)
""")


def test_a_store_that_cannot_write_never_holds_up_the_caller(tmp_path):
    """The file fills up while 30,000 rows are queued: the caller's wait for room ends with the failure (nothing
    would make room), it queues the rest at once (dropped, as every write after a failure is) and closes."""
    db = tmp_path / "r.db"
    Store(db).close()
    # room for more than one transaction of rows (at most 2,000 results: ~400 kB), far less than 30,000 need: with
    # 256 kB a first batch the writer happened to take whole did not fit, and nothing was stored (0, 336, 1065)
    limit = db.stat().st_size + 1024 * 1024
    p = subprocess.run([sys.executable, "-c", FULL_DISK_SCRIPT, str(db), str(ROOT), str(limit)], capture_output=True,
                       text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == ["TOLD", "QUEUED", "CLOSED"], p.stdout + p.stderr[-2000:]
    con = sqlite3.connect(db)
    assert con.execute("pragma integrity_check").fetchone()[0] == "ok"
    assert 0 < con.execute("select count(*) from results").fetchone()[0] < 30000
    con.close()


def test_copies_of_a_line_get_their_ids_in_one_step_each():
    """5,000 copies of one line get ids -2, -3, ... (unchanged: --resume relies on them) without trying every
    suffix taken before: 12.5 million lookups here, and minutes of planning for a file of 200,000 copies."""
    plan = Plan("cpu", ["iree"])

    class Counting(dict):
        lookups = 0

        def __contains__(self, key):
            Counting.lookups += 1
            return super().__contains__(key)

    plan.jobs = Counting()
    line = "conv -n 1 -c 4 -H x -W 8 -k 4"
    entry = InputEntry(source="f.txt:1", text=line, command=None, error="f.txt:1: bad")
    ids = [plan.add_entry(entry, [BASELINE])[0].job_id for _ in range(5000)]
    base = job_id(line, "-", "-", "cpu")
    assert ids[:3] == [base, f"{base}-2", f"{base}-3"] and ids[-1] == f"{base}-5000"
    assert len(set(ids)) == 5000
    assert Counting.lookups <= 5 * 5000, Counting.lookups


def test_copies_of_a_line_are_parsed_once_and_share_their_command(tmp_path):
    path = tmp_path / "copies.txt"
    good, bad = "conv -n 1 -c 4 -H 8 -W 8 -k 4 -y 3 -x 3", "conv -n 1 -c 4 -H x -W 8 -k 4"
    path.write_text(f"{good}\n{bad}\n" * 3)
    lines = read_commands_file(path, errors="collect")
    assert [line.source for line in lines] == [f"{path}:{i}" for i in range(1, 7)]
    goods, bads = lines[0::2], lines[1::2]
    assert all(line.command is goods[0].command for line in goods)
    assert all(line.command is None and line.message == f"{path}:{2 * i + 2}: conv: -H expects an integer, got 'x'"
               for i, line in enumerate(bads)), [line.message for line in bads]


@pytest.mark.parametrize("n", [3])
def test_weights_still_apply_to_each_copy_alone(tmp_path, n):
    path = tmp_path / "weighted.txt"
    line = "conv -n 1 -c 4 -H 8 -W 8 -k 4 -y 3 -x 3"
    path.write_text("".join(f"# boo-tui: calls={i + 1} share={i}%\n{line}\n" for i in range(n)) + f"{line}\n")
    lines = read_commands_file(path, errors="collect")
    assert [(c.command.calls, c.command.share) for c in lines] == [(1, 0.0), (2, 1.0), (3, 2.0), (None, None)]


def test_a_row_written_again_with_fewer_fields_forgets_the_others(tmp_path):
    """Rows bind only the columns they fill (a NULL left out is inserted as NULL: 24 -> 17 us a row); a job measured
    and then queued again must still lose every value of its measurement."""
    from tests.test_store import full_result

    store = Store(tmp_path / "r.db")
    run = store.start_run(command_line="t", target="cpu", config={}, environment={"host": "h"})
    measured = full_result("j1")
    store.record_result(run, measured)
    store.flush()
    again = JobResult(job_id="j1", command=measured.command, func_name=measured.func_name, op=measured.op,
                      variant=measured.variant, target="cpu", backend="iree", status="queued")
    store.record_result(run, again)
    store.close()
    (back,) = store.load_results(run)
    assert back == again, [(f, getattr(back, f), getattr(again, f)) for f in again.__dataclass_fields__
                           if getattr(back, f) != getattr(again, f)]
    con = sqlite3.connect(tmp_path / "r.db")
    assert con.execute("select count(*) from samples").fetchone()[0] == 0
    assert con.execute("select count(*) from kernels").fetchone()[0] == 0
    con.close()
