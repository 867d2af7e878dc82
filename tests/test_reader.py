"""A big commands file read by a process of its own (session/reader.py): the same lines, in the same order, as
reading it here, with each line's kernel name and facts worked out there; a reader killed part way loses no line;
a stop ends it. Real reader processes (the size threshold made 0), real aten resolutions through torch, a real
SQLite file."""
from __future__ import annotations

import os
import signal
import sqlite3
import time

import pytest

from boo_engine.commands.files import iter_commands_file
from boo_engine.errors import CommandError
from boo_engine.session import Session, SessionConfig, reader
from boo_engine.store.rows import dumps

ATEN = """aten::mm "[[3, 8], [8, 5]]" "['float', 'float']" "[[8, 1], [5, 1]]" "['', '']\""""
LINES = [
    "# a comment", "",
    "conv -n 1 -c 4 -H 8 -W 8 -k 4 -y 3 -x 3 -p 1 -q 1 --iter 5",
    "# boo-tui: calls=3 share=12.5% us=40",
    "gemm --a_w 16 --a_h 16 --b_w 16",
    "not a command",
    ATEN,
    "# boo-tui: calls=zero share=1%",            # a bad weight line: a bad line of its own
    "layernorm --input 2x8x16 --eps 1e-5 --mode 1 --normalized_dim 2 -F 1",
    "bnorm -n 2 -c 8 -H 4 -W 4 -m 1 -F 1",
    "conv -n 1 -c 4 -H 8 -W 8 -k 4 -y 3 -x 3 -p 1 -q 1 --iter 5",   # a copy
    "conv -n 1 -c 4 -H x -W 8 -k 4",
    ATEN,
]


def _file(tmp_path, lines=LINES, copies=1, name="cmds.txt"):
    path = tmp_path / name
    path.write_text("\n".join(lines * copies) + "\n")
    return str(path)


def _here(path, extra=()):
    return list(iter_commands_file(path, extra))


def _children() -> list[int]:
    """This process's child processes (from /proc), the ones that ended but were not waited for included."""
    me, out = os.getpid(), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == me:   # (a zombie too: a child not waited for)
            out.append(int(pid))
    return out


def test_a_reader_gives_the_lines_read_here_with_their_names_and_facts(tmp_path):
    path = _file(tmp_path)
    here = _here(path, ["--iter", "7"])
    read = list(reader.read_lines(path, ["--iter", "7"], min_bytes=0))
    assert [line for line, _, _ in read] == here            # the same lines, bad ones and weights included
    assert [line.command.iters for line in here if line.command] == [7] * 7
    for line, func_name, facts in read:
        if line.command is None:
            assert func_name is None and facts is None
            continue
        sig = line.command.signature
        sig.check()
        assert func_name == sig.func_name and facts == dumps(sig.describe())
    # what only the process that resolved the call knows, sent with it (this process never resolved it)
    aten_facts = [facts for line, _, facts in read if line.text == ATEN]
    assert len(aten_facts) == 2 and all('"output_shapes": [[3, 5]]' in f and '"overload"' in f for f in aten_facts)


def test_a_small_file_is_read_here(tmp_path):
    path = _file(tmp_path)
    before = _children()
    lines = reader.read_lines(path)            # (far under READER_BYTES)
    first = next(lines)
    assert first[1:] == (None, None) and _children() == before
    lines.close()


def test_a_file_the_reader_cannot_read_says_so_as_read_here(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"conv -n 1 -c 4 -H 8 -W 8 -k 4\n\xff\xfe\n")
    with pytest.raises(CommandError, match=r"commands file is not UTF-8 text: .*bad\.txt$"):
        list(reader.read_lines(str(bad), min_bytes=0))
    with pytest.raises(CommandError, match="commands file not found"):
        list(reader.read_lines(str(tmp_path / "none.txt"), min_bytes=0))


def test_a_reader_killed_part_way_loses_no_line(tmp_path):
    path = _file(tmp_path, copies=400)      # 4,400 lines: batches of 500, more than the pipe holds
    here = _here(path)
    before = set(_children())
    lines = reader.read_lines(path, min_bytes=0)
    got = [next(lines)]
    (child,) = set(_children()) - before
    os.kill(child, signal.SIGKILL)
    got += list(lines)                                    # the rest: what it had sent, then read here
    assert [line for line, _, _ in got] == here
    assert got[-1][1] is None                             # (the last lines were read here)


def test_closing_the_lines_ends_the_reader(tmp_path):
    path = _file(tmp_path, copies=400)
    before = set(_children())
    lines = reader.read_lines(path, min_bytes=0)
    next(lines)
    (child,) = set(_children()) - before
    lines.close()                                         # a stop: the session's intake closes them
    deadline = time.monotonic() + 10
    while child in _children() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child not in _children()


def _stored(db):
    with sqlite3.connect(db) as c:
        return (c.execute("SELECT job_id, func_name, status, error, calls, share FROM results ORDER BY id").fetchall(),
                c.execute("SELECT text, op, func_name, signature FROM commands ORDER BY text").fetchall())


def test_a_session_stores_from_a_reader_what_it_stores_reading_here(tmp_path, monkeypatch):
    # an aten call this process has not resolved yet (what it knows of it comes from the reader), read first
    fresh = ATEN.replace("[[3, 8], [8, 5]]", "[[3, 9], [9, 7]]").replace("[[8, 1], [5, 1]]", "[[9, 1], [7, 1]]")
    path = _file(tmp_path, [fresh, *LINES], copies=3)
    for name, threshold in (("reader.db", 0), ("here.db", 1 << 40)):
        monkeypatch.setattr(reader, "READER_BYTES", threshold)
        with Session(SessionConfig(target="cpu", db_path=str(tmp_path / name), cache_dir=str(tmp_path / "cache"),
                                   verify_numerics=False)) as s:
            s.add_inputs([path])
            s.start()          # (every row stored as queued) ...
            s.interrupt()      # ... and nothing measured
    here, read = _stored(tmp_path / "here.db"), _stored(tmp_path / "reader.db")
    assert read == here and len(read[0]) == 3 * 19
    atens = [sig for _, op, _, sig in read[1] if op.startswith("aten")]
    assert len(atens) == 2 and all('"overload"' in sig for sig in atens)
