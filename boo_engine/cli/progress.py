"""The headless run's stderr: a rich progress bar with ETA, one line per finished job, the bad lines of a commands
file, and one line for the jobs a stop leaves unmeasured. Fed from engine threads (`Progress.on_event`)."""
from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .. import events as ev
from ..results import DONE, INTERRUPTED, JobResult

if TYPE_CHECKING:  # pragma: no cover
    from rich import progress as rich_progress

PROG = "boo-tui"


class Progress:
    """A rich progress bar with ETA on stderr, plus one line per finished job. Fed from engine threads."""

    def __init__(self, stopped: threading.Event | None = None) -> None:
        from rich.console import Console

        self.console = Console(stderr=True)
        self._progress: rich_progress.Progress | None = None
        self._task: rich_progress.TaskID | None = None
        self.muted = False   # a run refused before it started: its unstarted jobs are not news
        self._stopped = stopped   # once set, the jobs the stop leaves are counted, not listed (600,000 lines once)
        self._interrupted = 0

    def begin(self, total: int) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
            console=self.console, transient=False,
        )
        self._task = self._progress.add_task("measuring", total=total)
        self._progress.start()

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def say_interrupted(self, stored: int | None = None) -> None:
        """One line for the jobs the stop left unmeasured (once); `stored`: how many the database says (a run
        too big to hold: most were never held, so no event told them)."""
        if stored is not None:
            self._interrupted = stored
        if self._interrupted:
            n, self._interrupted = self._interrupted, 0
            self.lines([f"{PROG}: {n:,} job{'s' if n != 1 else ''} not measured (interrupted)"])

    def lines(self, lines: Iterable[str]) -> None:
        """Print lines on stderr, each whole however long: above the progress bar while it shows (rich), else
        as plain text (rich takes ~0.1 ms a line: 200,000 interrupted jobs would take 20 s)."""
        if self._progress is not None:
            for line in lines:
                self.console.print(line, highlight=False, markup=False, soft_wrap=True)
            return
        lines = iter(lines)
        with contextlib.suppress(OSError, ValueError):   # stderr closed: the run goes on
            while chunk := "".join(f"{line}\n" for line in itertools.islice(lines, 1000)):   # (not all 200,000
                self.console.file.write(chunk)                                             # bad lines at once)
            self.console.file.flush()

    def on_event(self, event: ev.Event) -> None:
        if self.muted:
            return
        if isinstance(event, ev.JobFinished):
            r = event.result
            if self._progress is not None and self._task is not None:
                self._progress.advance(self._task)
            if r.status == INTERRUPTED and self._stopped is not None and self._stopped.is_set():
                self._interrupted += 1
                return
            self.lines([result_line(r)])
        elif isinstance(event, ev.JobQueued) and self._progress is not None and self._task is not None:
            # jobs added while running grow the bar
            self._progress.update(self._task, total=(self._progress.tasks[0].total or 0) + 1)
        elif isinstance(event, ev.JobStatus) and self._progress is not None and self._task is not None:
            self._progress.update(self._task, description=event.status)
        elif isinstance(event, ev.Log):  # one line, however long (a path may be in it)
            self.lines([f"{event.level}: {event.message}"])


def result_line(r: JobResult) -> str:
    who = f"{r.func_name or r.command} [{r.variant}/{r.backend}]"
    if r.status == DONE and r.stats is not None:
        extra = []
        if r.numerics is not None:
            extra.append(f"numerics {r.numerics.verdict}")
        if r.noisy:
            extra.append(f"NOISY ({r.noise_reason})")
        if r.error:
            extra.append(r.error)
        tail = ("  " + ", ".join(extra)) if extra else ""
        return f"done    {who}: median {r.stats.median_us:.2f} us (n={r.stats.n}){tail}"
    return f"{r.status:<7} {who}: {r.error or ''}"
