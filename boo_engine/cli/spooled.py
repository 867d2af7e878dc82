"""The headless run of a commands file too big to hold (session/spool.py): past KEEP jobs the run is kept in the
database, measured WINDOW jobs at a time, and exported from the database a chunk at a time (a CSV; a JSON or
Markdown export is made of the whole run read back at once).

A file under KEEP jobs (every real model's: the 413 convs of the sample models are 826) runs held in memory, as
ever; the headless run (headless.py) only asks `plan_inputs` whether it spooled.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..results import FAILED, INTERRUPTED, JobResult
from .progress import Progress, result_line
from .signals import StopSignals

if TYPE_CHECKING:
    import argparse

    from ..compare import Comparison

    Comparisons = dict[tuple[str, str, str], Comparison]
    from ..session import Session

PROG = "boo-tui"
#: jobs a headless run holds in memory at most before it spools (~1.6 KB each: 32 MiB)
KEEP = 20000
#: jobs measured at a time by a spooled run (and a command's other jobs with the last one)
WINDOW = 2000


class Planned:
    """What planning a run's inputs gave: the jobs held (all of them unless it spooled), how many jobs in all and
    how many of them failed there (bad lines), and the kernels' names when a variant names kernels."""

    def __init__(self, session: Session, progress: Progress) -> None:
        self.jobs: list[JobResult] = []
        self.total = self.failed = 0
        self.names: set[str] = set()
        self._progress = progress
        self._session = session

    def add(self, results: list[JobResult]) -> None:
        """Jobs planned (a chunk stored and dropped, or those held at the end): their bad lines said now (one
        write, however many), their kernels' names kept if needed."""
        bad = [r for r in results if r.status == FAILED]
        self.failed += len(bad)
        self._progress.lines(result_line(r) for r in bad)
        if any(v.named_kernels for v in self._session.variants):   # (a resumed run's variants, once they are)
            self.names.update(r.func_name for r in results if r.func_name)


def plan_inputs(session: Session, args: argparse.Namespace, progress: Progress, stops: StopSignals) -> Planned:
    """The run's inputs planned (a resumed run's own when none are given); beyond KEEP jobs, spooled: the run
    starts then (its rows are stored as it goes), and a signal from then on stops it cleanly."""
    planned = Planned(session, progress)
    if args.inputs:
        def started() -> None:
            stops.raising = False

        planned.total = session.spool.add_inputs(args.inputs, KEEP, planned.add, on_spool=started,
                                                 stop=stops.event)
    else:
        planned.total = len(session.add_resumed_commands())
    planned.jobs = list(session.jobs.values())
    planned.add(planned.jobs)
    return planned


def run_spooled(session: Session, args: argparse.Namespace, planned: Planned, progress: Progress,
                stops: StopSignals, regressions_of: Callable[[Comparisons], list[str]]) -> tuple[bool, list[str]]:
    """Measure a spooled run a window at a time until done or stopped, export it, and say whether every job
    succeeded and which variants regressed (`regressions_of` each chunk's comparisons). BooError: an export that
    cannot be written, or a database that cannot be read."""
    progress.begin(planned.total - planned.failed)
    stops.raising = False   # from now on a signal stops the run cleanly
    while not stops.event.is_set() and (window := session.spool.next_window(WINDOW)):
        while not stops.event.is_set() and not session.wait(timeout=0.2):
            pass
        session.spool.forget(window)
    if stops.event.is_set():
        progress.stop()
        print(f"{PROG}: {stops.name}: stopping; unfinished jobs are stored as interrupted (--resume measures "
              f"them); again to exit at once", file=sys.stderr)
        session.interrupt()
        progress.say_interrupted(session.spool.count(INTERRUPTED))
    session.wait()
    partial = " (partial: run interrupted)" if stops.received else ""
    for out in args.export:
        session.spool.export(out)
        print(f"{PROG}: wrote {out}{partial}", file=sys.stderr)
    if not args.export:
        _print_markdown(session)
    regressions = []
    if args.fail_on_regression is not None:
        for chunk in session.spool.results():
            regressions += regressions_of(session.comparisons(chunk))
    return session.spool.failed_jobs() == 0, regressions


def _print_markdown(session: Session) -> None:
    from ..markdown import render_markdown

    results = [r for chunk in session.spool.results() for r in chunk]
    comparisons = session.comparisons(results)
    run = session.store.run_info(session.run_id) if session.run_id is not None else None
    sys.stdout.write(render_markdown(results, environment=session.environment(), run=run, comparisons=comparisons,
                                     min_effect=session.config.min_effect,
                                     model=session.model_lines(results, comparisons)))
