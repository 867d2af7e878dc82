"""A big commands file parsed by a process of its own, on another core, while this one plans what it reads.

Planning a 200,000-line file spent about half of its time parsing lines (splitting them, their flags, the
signatures, an aten call's overload through torch) and the rest making jobs and rows, all of it under one GIL. A
regular file of READER_BYTES or more is therefore read by a process of its own (`main`, below): it
runs `iter_commands_file` and sends back, a batch at a time, each line with what the plan and the store would
otherwise work out here: its kernel name and its signature's facts as the JSON the store keeps (`describe()`, with
an aten call's overload and output shapes, which only the process that resolved the call knows). This process only
unpickles them (~7 us a line, against ~55 to parse one).

The lines come in the file's order and are exactly what `iter_commands_file` gives (tests/test_reader.py); a file
that cannot be read raises the same CommandError, when the first line is asked for. A smaller file, a pipe, or a
reader that cannot start is read here, as before. The reader runs in a session of its own, so a Ctrl-C meant for
this process does not reach it first: closing the iterator (a stop) ends it, and it ends itself once nobody reads
what it writes. What it sends is our own objects, pickled by our own code from the file's text.
"""
from __future__ import annotations

import gc
import json
import os
import pickle
import signal
import stat
import subprocess
import sys
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import IO

from ..commands import CommandLine, iter_commands_file
from ..errors import CommandError
from ..ops.base import OpSignature
from ..store.rows import dumps

#: a regular file this big or bigger is read by a reader process (~20,000 lines: 2 s of parsing; starting the
#: reader costs ~0.3 s, on the other core)
READER_BYTES = 2 << 20
#: the reader process's program: main() below, given the path and the extra arguments (as JSON)
_CHILD = "import sys; from boo_engine.session.reader import main; sys.exit(main(sys.argv[1:]))"
_ROOT = str(Path(__file__).resolve().parents[2])
#: lines per message
BATCH = 500
#: signatures whose kernel name and facts are remembered at most (a copy of a line shares its parse)
KNOWN_KEPT = 4096


#: a line of a commands file with, for a line that parses, its kernel name and its signature's facts (the JSON the
#: store keeps); None: work them out here. (A tuple: what pickles fastest)
ReadLine = tuple[CommandLine, str | None, str | None]


def read_lines(path: str, extra_args: Sequence[str] = (), *,
               min_bytes: int | None = None) -> Generator[ReadLine, None, None]:
    """Every line of a commands file, as `iter_commands_file` gives them: from a reader process for a regular file
    of `min_bytes` (READER_BYTES) or more, else read here. A reader that does not start, or stops part way
    (killed), is not an error: the lines it did not send are read here."""
    extra = [str(a) for a in extra_args]
    after = 0   # the number of the last line given
    big = _worth_a_process(path, READER_BYTES if min_bytes is None else min_bytes)
    proc = _start(path, extra) if big else None
    if proc is not None:
        assert proc.stdout is not None
        try:
            for item in _receive(proc.stdout):
                after = int(item[0].source.rpartition(":")[2])
                yield item
            return
        except _Stopped:
            pass
        finally:
            proc.stdout.close()
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    yield from ((line, None, None) for line in iter_commands_file(path, extra, after=after))


class _Stopped(Exception):
    """The reader process ended before the end of its file."""


def _worth_a_process(path: str, min_bytes: int) -> bool:
    if not sys.executable:
        return False
    try:
        st = os.stat(path)
    except OSError:
        return False   # (iter_commands_file says what is wrong with it)
    return stat.S_ISREG(st.st_mode) and st.st_size >= min_bytes


def _start(path: str, extra: list[str]) -> subprocess.Popen[bytes] | None:
    # the child imports this very boo_engine, wherever it was imported from here
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (_ROOT, os.environ.get("PYTHONPATH")) if p))
    try:
        return subprocess.Popen([sys.executable, "-c", _CHILD, os.fspath(path), json.dumps(extra)], env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    except OSError:   # (no interpreter to start)
        return None


def _receive(stream: IO[bytes]) -> Iterator[ReadLine]:
    """What the reader sends, to its end; CommandError for a file it could not read, _Stopped when it ended
    without saying so: killed, or failed (a bug: reading the rest here shows it, with its traceback)."""
    while True:
        try:
            kind, payload = pickle.load(stream)
        except (EOFError, pickle.UnpicklingError, ValueError):
            raise _Stopped from None
        if kind == "lines":
            yield from payload
        elif kind == "error":
            raise CommandError(payload)
        elif kind == "end":
            return
        else:
            raise _Stopped


def serve(path: str, extra_args: Sequence[str], out: IO[bytes]) -> None:
    """The reader's side: the file's lines to `out`, BATCH at a time, then ("end", None); ("error", message) for
    a file that cannot be read."""
    known: dict[int, tuple[OpSignature, str, str]] = {}   # id(signature) -> (it, its kernel name, its facts)
    batch: list[ReadLine] = []

    def send(kind: str, payload: object) -> None:
        pickle.dump((kind, payload), out, protocol=pickle.HIGHEST_PROTOCOL)
        out.flush()

    try:
        for line in iter_commands_file(path, extra_args):
            if line.command is None:
                batch.append((line, None, None))
            else:
                sig = line.command.signature
                seen = known.get(id(sig))
                if seen is None or seen[0] is not sig:
                    if len(known) >= KNOWN_KEPT:
                        known.clear()
                    seen = known[id(sig)] = (sig, sig.func_name, dumps(sig.describe()) or "")
                batch.append((line, seen[1], seen[2]))
            if len(batch) >= BATCH:
                send("lines", batch)
                batch = []
        send("lines", batch)
    except CommandError as exc:
        send("lines", batch)
        send("error", str(exc))
        return
    send("end", None)


def main(argv: Sequence[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # (in a session of its own: only its parent stops it)
    gc.disable()   # what it makes is sent and freed, with no cycle: a collection would find nothing (state.py)
    try:
        serve(argv[0], json.loads(argv[1]), sys.stdout.buffer)
    except BrokenPipeError:   # the reading process stopped reading: nothing more to do
        os._exit(0)
    return 0


