"""A run too big to hold (session/spool.py): its jobs stored and dropped, measured a window at a time, exported
from the database. Real compiles, a real worker process, real SQLite files; the thresholds made small so a few
lines spool."""
from __future__ import annotations

import csv
import os
import random
import sqlite3
import threading

import pytest

from boo_engine.cli import headless, spooled
from boo_engine.commands.files import _read_lines, iter_commands_file
from boo_engine.errors import BooError, CommandError
from boo_engine.session import Session, SessionConfig, spool
from boo_engine.session.plan import IdSet, InputEntry, Plan
from boo_engine.variants import BASELINE, Variant

CONV_A = "conv -n 1 -c 4 -H 8 -W 8 -k 4 -y 3 -x 3 -p 1 -q 1 --iter 5"
CONV_B = "conv -n 1 -c 8 -H 8 -W 8 -k 4 -y 1 -x 1 --iter 5"
GEMM = "gemm --a_w 16 --a_h 16 --b_w 16 --iter 5"
#: two copies of a line, two bad lines, three kernels: 2 jobs a good line (iree, torch)
LINES = [CONV_A, CONV_A, "not a command", GEMM, "conv -n 1 -c 4 -H x -W 8 -k 4", CONV_B]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cache"))


def _commands(tmp_path, lines=LINES):
    path = tmp_path / "cmds.txt"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _session(tmp_path, cache_dir, name="r.db", **kw):
    kw.setdefault("verify_numerics", False)
    return Session(SessionConfig(target="cpu", db_path=str(tmp_path / name), cache_dir=cache_dir, **kw))


def _rows(db):
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT job_id, status FROM results ORDER BY id").fetchall()
        runs = c.execute("SELECT status FROM runs ORDER BY id").fetchall()
    return rows, [r[0] for r in runs]


def _measure_windows(session, size, stop_after=None):
    """Every window measured (or the first `stop_after`); the most jobs held at once."""
    held, n = 0, 0
    while (window := session.spool.next_window(size)) and (stop_after is None or n < stop_after):
        held = max(held, len(session.jobs))
        session.wait()
        session.spool.forget(window)
        n += 1
    return held


def test_a_spooled_run_stores_and_measures_what_a_held_run_does(tmp_path, cache_dir):
    commands = _commands(tmp_path)
    with _session(tmp_path, cache_dir, "held.db") as held:
        held.add_inputs([commands])
        held.start()
        held.wait()
    with _session(tmp_path, cache_dir, "spooled.db") as s:
        dropped = []
        assert s.spool.add_inputs([commands], 2, lambda rs: dropped.append(len(rs))) == 8 + 2
        assert s.spool.spooled and not s.jobs and sum(dropped) == 10
        most = _measure_windows(s, 2)
        assert not s.jobs and s._plan.total == 10
        # a window is 2 jobs and the rest of its last command's: the two copies of CONV_A are one command
        assert most <= 4
    held_rows, held_runs = _rows(tmp_path / "held.db")
    rows, runs = _rows(tmp_path / "spooled.db")
    assert rows == held_rows                     # the same ids (the copy's -2 too), in the same order, same ends
    assert [st for _, st in rows].count("done") == 8 and runs == held_runs == ["failed"]   # (the bad lines)


def test_a_spooled_run_stopped_between_windows_leaves_every_job_stored_and_resumes(tmp_path, cache_dir):
    commands = _commands(tmp_path)
    with _session(tmp_path, cache_dir) as s:
        s.spool.add_inputs([commands], 2)
        _measure_windows(s, 2, stop_after=1)
        s.interrupt()
        run_id = s.run_id
    rows, runs = _rows(tmp_path / "r.db")
    assert len(rows) == 10 and runs == ["interrupted"]
    statuses = [st for _, st in rows]
    assert statuses[:4] == ["done"] * 4 and statuses.count("interrupted") == 4 and statuses.count("failed") == 2
    # nothing lost: --resume (no inputs) measures what the stop left, under the same ids
    with _session(tmp_path, cache_dir, resume=run_id) as again:
        again.add_resumed_commands()
        again.start()
        again.wait()
    rows_after, runs = _rows(tmp_path / "r.db")
    assert [j for j, _ in rows_after] == [j for j, _ in rows]
    assert [st for _, st in rows_after].count("done") == 8 and runs == ["failed"]


def test_spooling_holds_a_chunk_at_most_and_a_stop_ends_the_rows_it_does_not_hold(tmp_path, cache_dir, monkeypatch):
    monkeypatch.setattr(spool, "SPOOL_CHUNK", 10)
    lines = [f"conv -n 1 -c {i} -H x -W 8 -k 4" for i in range(60)] + [f"gemm --a_w {i} --a_h 8 --b_w 8"
                                                                        for i in range(1, 41)]
    random.Random(0).shuffle(lines)
    with _session(tmp_path, cache_dir) as s:
        chunks = []
        assert s.spool.add_inputs([_commands(tmp_path, lines)], 5, lambda rs: chunks.append(len(rs))) == 140
        assert max(chunks) <= 10 + 1 and sum(chunks) == 140 and not s.jobs and not s._plan.entries
        with pytest.raises(BooError, match="too big to hold"):
            s.add_variant(Variant(name="late", flags=("--iree-opt-level=O1",)))
        s.interrupt()
    rows, runs = _rows(tmp_path / "r.db")
    assert len({j for j, _ in rows}) == len(rows) == 140 and runs == ["interrupted"]
    assert sorted({st for _, st in rows}) == ["failed", "interrupted"]   # none left saying queued


def test_a_line_given_again_after_its_jobs_were_dropped_gets_an_id_of_its_own(tmp_path):
    plan = Plan("cpu", ("iree",))
    entry = InputEntry.from_line(next(iter_commands_file(_commands(tmp_path, [GEMM]))))
    ids = []
    for _ in range(3):
        (job,) = plan.add_entry(entry, [BASELINE])
        ids.append(job.job_id)
        plan.forget([job.job_id])
    assert ids[1:] == [f"{ids[0]}-2", f"{ids[0]}-3"] and not plan.jobs and plan.total == 0   # (dropped queued)


def test_the_id_set_is_a_set():
    ids, ref = IdSet(), set()
    rng = random.Random(1)
    values = list({rng.getrandbits(48) for _ in range(3 * IdSet.MERGE_AT)})   # (each added once, as Plan does)
    for v in values:
        ids.add(v)
        ref.add(v)
    assert len(ids) == len(ref) and all(v in ids for v in ref) and ids._sorted   # (merged at least once)
    assert not any(rng.getrandbits(48) in ids for _ in range(2000))


def test_a_commands_file_is_read_a_line_at_a_time_as_splitlines_cuts_it(tmp_path):
    path = tmp_path / "odd.txt"
    path.write_bytes("\ufeffgemm --a_w 8\r\nconv -n 1\x0cgemm\rlast\n\n\u2028x\nno newline".encode())
    assert list(_read_lines(path)) == path.read_text(encoding="utf-8-sig").splitlines()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text("a\nb\n"))
    writer.start()
    assert list(_read_lines(fifo)) == ["a", "b"]   # a pipe is read once
    writer.join()
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"gemm --a_w 8\n" * 100_000 + b"\xff\n")
    lines = _read_lines(bad)
    with pytest.raises(CommandError, match="not UTF-8"):   # before the first line, as reading it whole did
        next(lines)


def _cli(tmp_path, cache_dir, name, commands, *extra):
    db, out = tmp_path / f"{name}.db", tmp_path / f"{name}.csv"
    code = headless.main([commands, "--target", "cpu", "--db", str(db), "--cache-dir", cache_dir, "--export",
                          str(out), *extra])
    with open(out, newline="") as f:
        rows = [(r["job_id"], r["status"], r["variant"], r["backend"], r["command"]) for r in csv.DictReader(f)]
    return code, rows


def test_the_headless_run_of_a_file_too_big_to_hold(tmp_path, cache_dir, monkeypatch):
    commands = _commands(tmp_path)
    held = _cli(tmp_path, cache_dir, "held", commands)
    monkeypatch.setattr(spooled, "KEEP", 2)
    monkeypatch.setattr(spooled, "WINDOW", 2)
    spooled_run = _cli(tmp_path, cache_dir, "spooled", commands, "--export", str(tmp_path / "spooled.json"))
    assert spooled_run == held and held[0] == 1        # the bad lines: exit 1, as a held run
    assert len(held[1]) == 3 * 4 + 2                   # 4 good lines x (baseline, best, torch), 2 bad lines
    assert (tmp_path / "spooled.json").stat().st_size > 0
    _, runs = _rows(tmp_path / "spooled.db")
    assert runs == ["failed"]
