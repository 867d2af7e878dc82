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

import functools
import gc
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..config import SessionConfig
from ..errors import BooError
from ..results import FAILED, IREE, TORCH, JobResult, Status
from ..store.stream import QueuedRow, queued_rows, result_chunk, status_count, unsucceeded
from ..variants import BASELINE
from .device_stages import DeviceStages
from .finalize import compare_columns, model_lines_of
from .intake import Intake
from .plan import InputEntry
from .recording import RunRecorder
from .runner import Runner
from .state import SessionState

#: jobs stored and dropped at a time once a run spools (a transaction of bulk rows each)
SPOOL_CHUNK = 10000
#: chunks stored and dropped between two collections of their cyclic garbage
COLLECT_EVERY = 4
#: results read back at a time (an export's chunk)
READ_CHUNK = 2000


class Spool:
    """The session's spooling (`Session.spool`). `environment()`: the session's, stored with the run it opens."""

    def __init__(self, config: SessionConfig, state: SessionState, recorder: RunRecorder, intake: Intake,
                 environment: Callable[[], dict[str, Any]], measuring: DeviceStages, runner: Runner) -> None:
        self._config = config
        self._state = state
        self._plan = state.plan
        self._recorder = recorder
        self._intake = intake
        self._environment = environment
        self._measuring = measuring
        self._runner = runner
        self._after = 0        # the last row read back
        self._chunks = 0       # chunks stored and dropped

    @property
    def spooled(self) -> bool:
        return self._state.spooled

    def add_inputs(self, inputs: Sequence[str], keep: int,
                   on_dropped: Callable[[list[JobResult]], None] | None = None, *,
                   on_spool: Callable[[], None] | None = None, stop: threading.Event | None = None) -> int:
        """`Intake.add_inputs`, held while at most `keep` jobs are; beyond, spooled. Returns how many jobs were
        planned. `on_dropped`: told each chunk of jobs stored and dropped (a front end says the bad lines);
        `on_spool`: told once, before the first is stored (the run starts: a stop from now on is a clean one);
        `stop`: once set after that, the lines not planned yet never join the run (as a start() stopped while it
        stores rows)."""
        planned = 0
        for jobs in self._intake.each(inputs):
            planned += len(jobs)
            held = len(self._plan.jobs)
            if (held >= SPOOL_CHUNK) if self._state.spooled else (held > keep):
                if not self._state.spooled and on_spool is not None:
                    on_spool()
                self._store_and_drop(on_dropped)
            if self._state.spooled and stop is not None and stop.is_set():
                break
        if self._state.spooled:
            self._store_and_drop(on_dropped)
        return planned

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
            self._plan.entries.clear()   # (kept for variants added mid-session, which a spooled run refuses)
        # The collector is paused while a file is planned (state.collector_paused: what planning makes has no
        # cycles, mostly); what had some (an aten line's literals: ast.literal_eval's closures) would wait for
        # the end of a file of any length. The young garbage of the last chunks is collected (~30 ms).
        self._chunks += 1
        if self._chunks % COLLECT_EVERY == 0:
            gc.collect(0)
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

    # ---- reading it back ------------------------------------------------------------------------------
    def results(self, size: int = READ_CHUNK) -> Iterator[list[JobResult]]:
        """Every result of the run from the database, in the order stored, about `size` at a time: a command's
        results in one chunk (they are compared together), unless one command alone has more than `size`."""
        store, run_id = self._recorder.store, self._recorder.run_id
        if run_id is None:
            return
        store.flush()
        after, carry = 0, list[JobResult]()
        while rows := store.read(functools.partial(result_chunk, run_id=run_id, after=after, limit=size)):
            after = rows[-1][0]
            chunk = carry + [r for _, r in rows]
            cut = len(chunk)
            while cut > 0 and chunk[cut - 1].command == chunk[-1].command:
                cut -= 1
            cut = cut or len(chunk)   # (one command fills the chunk: given as it is)
            carry = chunk[cut:]
            yield chunk[:cut]
        if carry:
            yield carry

    def failed_jobs(self) -> int:
        """The run's jobs that did not end done with numerics that passed (or were not checked): what makes a
        headless run exit 1."""
        return self._count(unsucceeded)

    def count(self, status: Status) -> int:
        """The run's jobs whose rows say `status`."""
        return self._count(functools.partial(status_count, status=status))

    def _count(self, query: Callable[[sqlite3.Connection, int], int]) -> int:
        run_id = self._recorder.run_id
        if run_id is None:
            return 0
        self._recorder.store.flush()
        return self._recorder.store.read(lambda conn: query(conn, run_id))

    def export(self, path: str) -> None:
        """The run to `path`: a CSV written a chunk at a time; JSON and Markdown made whole (the run read back at
        once: their summaries and tables are of every result)."""
        from ..exporters import export_csv_chunks, export_format, export_results

        cfg, store, run_id = self._config, self._recorder.store, self._recorder.run_id
        if export_format(path) == ".csv":
            export_csv_chunks(path, self.results(), functools.partial(compare_columns, config=cfg),
                              functools.partial(model_lines_of, config=cfg))
            return
        results = [r for chunk in self.results() for r in chunk]
        comparisons = compare_columns(results, cfg)
        export_results(path, results, environment=self._environment(),
                       run=store.run_info(run_id) if run_id is not None else None, comparisons=comparisons,
                       min_effect=cfg.min_effect, model=model_lines_of(results, comparisons, cfg))

    def forget(self, results: Sequence[JobResult]) -> None:
        """Drop a measured window from memory: its rows are stored (flushed by the runner before each group, and
        by close())."""
        with self._state.lock:
            self._plan.forget([r.job_id for r in results], taken=True)


def _window(conn: sqlite3.Connection, run_id: int, after: int, size: int) -> list[QueuedRow]:
    """`size` queued rows after row `after`, and the ones after them of the same command (a line's jobs)."""
    rows = queued_rows(conn, run_id, after, size)
    while rows:
        more = queued_rows(conn, run_id, rows[-1].row_id, 16)
        same = 0
        while same < len(more) and more[same].command == rows[-1].command:
            same += 1
        rows += more[:same]
        if same < len(more) or not more:
            break
    return rows
