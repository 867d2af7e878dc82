"""A run too big to hold: its jobs kept in the database, a window of them in memory.

A commands file of 200,000 lines is 400,000 jobs; held as records (a JobResult, its PlannedJob, its parsed
command) they took ~1.6 KB each, 640 MiB. Spooled (`add_inputs` with `keep`), the lines are planned as ever, but
once more than `keep` jobs are held, they are stored (queued rows, a bad line's failed row: in bulk, as start()
stores them) and dropped, and so is every chunk after. Then the run is measured a window at a time
(`next_window`): its next queued rows read back, planned again under their own ids, queued, measured, and dropped
once final (`forget`). What stays of each job is its id's 48 bits (a line given again still gets an id of its
own: plan.py `_taken`) and its final status, counted. The front end exports the run from the database a chunk at
a time (exporters.export_stored).

As in a run held in memory, every row is stored before the first measurement: a stop at any moment leaves each
job in the database (the queued ones interrupted in one statement), and --resume measures them.
"""
from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..commands import looks_like_commands_file
from ..errors import BooError
from ..results import FAILED, IREE, TORCH, JobResult
from ..store.stream import QueuedRow, queued_rows
from ..variants import BASELINE
from .device_stages import DeviceStages
from .intake import Intake
from .plan import InputEntry
from .recording import RunRecorder
from .runner import Runner
from .state import SessionState

#: jobs stored and dropped at a time once a run spools (a transaction of bulk rows each)
SPOOL_CHUNK = 10000


class Spool:
    """The session's spooling (`Session.spool`). `environment()`: the session's, stored with the run it opens."""

    def __init__(self, state: SessionState, recorder: RunRecorder, intake: Intake,
                 environment: Callable[[], dict[str, Any]], measuring: DeviceStages, runner: Runner) -> None:
        self._state = state
        self._plan = state.plan
        self._recorder = recorder
        self._intake = intake
        self._environment = environment
        self._measuring = measuring
        self._runner = runner
        self._after = 0        # the last row read back
        self.planned = 0       # jobs planned by add_inputs

    @property
    def spooled(self) -> bool:
        return self._state.spooled

    def add_inputs(self, inputs: Sequence[str], keep: int,
                   on_dropped: Callable[[list[JobResult]], None] | None = None) -> int:
        """`Intake.add_inputs`, held while at most `keep` jobs are; beyond, spooled. Returns how many jobs were
        planned. `on_dropped`: told each chunk of jobs stored and dropped (a front end says the bad lines)."""
        for jobs in self._planned(inputs):
            self.planned += len(jobs)
            held = len(self._plan.jobs)
            if (held >= SPOOL_CHUNK) if self._state.spooled else (held > keep):
                self._store_and_drop(on_dropped)
        if self._state.spooled:
            self._store_and_drop(on_dropped)
        return self.planned

    def _planned(self, inputs: Sequence[str]) -> Iterator[list[JobResult]]:
        for item in inputs:
            if looks_like_commands_file(item):
                for _, jobs in self._intake.lines(item):
                    yield jobs
            else:
                yield self._intake.add_command(item)

    def _store_and_drop(self, on_dropped: Callable[[list[JobResult]], None] | None) -> None:
        state = self._state
        if state.stop.is_set() or state.halted is not None:   # (closed, interrupted, or the store took no more)
            raise BooError(state.halted or "session was interrupted")
        self._recorder.start_run(self._environment(), self._intake.variants)   # (once)
        with state.lock:
            held = list(self._plan.jobs.values())
            self._recorder.record_many(held)   # queued rows (failed ones for bad lines), in bulk
            self._recorder.forget_commands()
            state.spooled = state.spooling = True
            self._plan.forget([r.job_id for r in held])
        if on_dropped is not None:
            on_dropped(held)

    def next_window(self, size: int) -> list[JobResult]:
        """The run's next `size` queued jobs (and the rest of the last one's command: a command's variants and
        torch are measured interleaved, and compared, together), read back from the database and queued for the
        runner; [] once none is left (the run then ends when the session goes idle)."""
        state, store, run_id = self._state, self._recorder.store, self._recorder.run_id
        if not state.spooled or run_id is None or state.stop.is_set() or state.halted is not None:
            return []
        store.flush()   # (the rows the writer has not written yet are not read back)
        rows = store.read(lambda conn: _window(conn, run_id, self._after, size))
        if not rows:
            state.spooling = False
            state.wake.set()   # the runner, idle, ends the run
            return []
        self._after = rows[-1].row_id
        with state.lock:
            results = [self._adopt(row) for row in rows]
            state.queued += [r.job_id for r in results if r.status != FAILED]
            self._measuring.ensure_worker()
            self._runner.ensure_running()
        return results

    def _adopt(self, row: QueuedRow) -> JobResult:
        """A queued row held again (planned as when it was stored: the session's extra arguments, its variant);
        one that no longer plans is stored failed, saying why (it planned moments ago: never seen)."""
        variant = next((v for v in self._intake.variants if v.name == row.variant),
                       BASELINE if row.variant == BASELINE.name else None)
        command, error = None, f"no variant {row.variant!r} in this session"
        if variant is not None:
            try:
                command = self._intake.parse(row.command)
            except BooError as e:
                error = str(e)
        entry = InputEntry(row.source, row.command, command, error, calls=row.calls, share=row.share,
                           captured_us=row.captured_us)
        result = self._plan.adopt(row.job_id, entry, variant or BASELINE, TORCH if row.backend == TORCH else IREE)
        if result.status == FAILED:
            self._recorder.finish(result, FAILED)
        return result

    def forget(self, results: Sequence[JobResult]) -> None:
        """Drop a measured window from memory: its rows are stored (flushed by the runner before each group, and
        by close())."""
        with self._state.lock:
            self._plan.forget([r.job_id for r in results])


def _window(conn: sqlite3.Connection, run_id: int, after: int, size: int) -> list[QueuedRow]:
    """`size` queued rows after row `after`, and the ones after them of the same command (a line's jobs)."""
    rows = queued_rows(conn, run_id, after, size)
    while rows:
        command = rows[-1].command
        more = queued_rows(conn, run_id, rows[-1].row_id, 16)
        same = list(itertools.takewhile(lambda r, c=command: r.command == c, more))
        rows += same
        if len(same) < len(more) or not more:
            break
    return rows
