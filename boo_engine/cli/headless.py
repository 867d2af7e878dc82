"""`boo-tui ... --export OUT`: the same session as the dashboard, without the UI.

stdout stays clean for data (a Markdown table when no --export is given); progress, one line per finished job
and diagnostics go to stderr. Exit codes: 0 every job succeeded, 1 some job failed (it is still exported with its
reason) or the run stopped because the results database cannot be written (one line says so; what was measured
is still exported; the jobs not measured are interrupted, for --resume), 2 usage errors (bad arguments, missing
input file, bad spec, unwritable export path), 3 a variant is significantly slower than the baseline by more than
--fail-on-regression PCT.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import os
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..errors import BooError
from ..results import FINAL_STATUSES
from .common import config_from_args, job_succeeded
from .exits import EXIT_FAILED, EXIT_OK, EXIT_REGRESSION, fail
from .progress import Progress
from .signals import StopSignals
from .spooled import Planned, plan_inputs, run_spooled

if TYPE_CHECKING:
    from ..compare import Comparison

PROG = "boo-tui"


def add_headless_args(p: argparse.ArgumentParser) -> None:
    h = p.add_argument_group("headless")
    h.add_argument("--export", action="append", default=[], metavar="OUT",
                   help="run without the UI and write results to OUT (.csv, .json or .md); repeatable")
    h.add_argument("--headless", action="store_true",
                   help="run without the UI; with no --export, print a Markdown table on stdout")
    h.add_argument("--fail-on-regression", type=float, default=None, metavar="PCT",
                   help="exit 3 when a variant is significantly slower than the baseline by more than PCT percent")
    h.add_argument("--compile-only", action="store_true",
                   help="compile every kernel (each variant) into the cache and measure nothing, e.g. for a GPU "
                        "target this machine does not have (then copy the cache to one that does)")
    h.add_argument("--dump-dispatches", default=None, metavar="DIR",
                   help="write each command's dispatch sources and configurations to DIR (edit them, then "
                        "measure with --variant NAME=DIR/) and exit")


def wants_headless(args: argparse.Namespace) -> bool:
    return bool(args.export or args.headless or args.dump_dispatches or args.compile_only)


def run_headless(args: argparse.Namespace) -> int:
    from .. import locations
    from ..exporters import check_export_path

    try:  # cheap checks first (no torch import): a usage error answers at once
        inputs = [f for f in [*args.inputs, *args.variants_file] if os.path.isfile(f)]
        for i, out in enumerate(args.export):
            check_export_path(out, databases=[locations.db_path(args.db)], inputs=inputs, others=args.export[:i])
        config = config_from_args(args)
    except BooError as e:
        return fail(PROG, str(e))
    if not args.inputs and args.resume is None:
        return fail(PROG, "no commands: give a commands file (e.g. sample_commands.txt) or a quoted command")
    if args.dump_dispatches:
        return _dump_dispatches(args, config)
    if args.compile_only:
        return _compile_only(args, config)

    # The benchmark worker process imports torch (~1 s) while this process does the same: started now, it is
    # ready by the time the first kernel can be measured.
    from ..bench.devices import default_devices
    from ..bench.worker import BenchWorker
    from ..targets import parse_target

    worker = None if config.ray_address else BenchWorker(   # --ray: the cluster's actors measure
        threads=config.threads, device=(config.devices or default_devices(parse_target(config.target).kind))[0])
    try:
        return _run_session(args, config, worker)
    finally:
        if worker is not None:
            worker.close()  # idempotent: normally the session closed it already


def _run_session(args: argparse.Namespace, config, worker) -> int:
    """SIGINT, SIGTERM, SIGHUP: the run stops as `interrupted` (see signals.py), the exports are written marked
    partial, and the exit code is 128 + the signal's number; a second one exits at once."""
    from ..session import Session

    stops = StopSignals(PROG, hard_exit=lambda: _kill(worker.pid)).install()
    try:
        return _run_stoppable(args, config, worker, stops, Session)
    except KeyboardInterrupt:   # a stop signal before the run started: nothing measured, nothing to keep
        print(f"{PROG}: {stops.name}: stopped before the run started", file=sys.stderr)
        return stops.exit_code
    finally:
        stops.restore()


def _run_stoppable(args: argparse.Namespace, config, worker, stops, session_class) -> int:
    from ..variants import check_named_kernels

    progress = Progress(stopped=stops.event)
    try:
        session = session_class(config, listener=progress.on_event, worker=worker)
    except BooError as e:
        return fail(PROG, str(e))
    stops.hard_exit = session.kill_children
    try:
        try:
            planned = plan_inputs(session, args, progress, stops)
            for note in check_named_kernels(session.variants, sorted(planned.names)):
                print(f"{PROG}: note: {note}", file=sys.stderr)
        except BooError as e:
            progress.muted = True
            return fail(PROG, str(e))
        outcome: int | tuple[bool, list[str]]
        from ..exporters import ExportError

        if session.spool.spooled:   # (a file too big to hold: measured a window at a time)
            try:
                outcome = run_spooled(session, args, planned, progress, stops,
                                      functools.partial(_regressions, pct=args.fail_on_regression))
            except ExportError as e:
                return fail(PROG, str(e))
        else:
            outcome = _run_held(session, args, planned, progress, stops)
        if isinstance(outcome, int):
            return outcome
    finally:
        progress.stop()
        if stops.received:
            session.interrupt()   # (a signal before the run started: a resumed run is still interrupted)
        session.close()
        progress.say_interrupted()
    return _exit_code(session, stops, *outcome)


def _run_held(session, args: argparse.Namespace, planned: Planned, progress: Progress,
              stops: StopSignals) -> int | tuple[bool, list[str]]:
    """Measure the jobs held (every one of the run's), export them; whether every job succeeded and which
    variants regressed, or an exit code at once (the run could not start, an export could not be written)."""
    progress.begin(sum(1 for j in planned.jobs if j.status not in FINAL_STATUSES))
    stops.raising = False   # from now on a signal stops the run cleanly (the loops below notice it)
    try:
        _start(session, stops.event)
    except BooError as e:  # the database could not take the run (the session's error Log said so)
        if session.failure is None:
            return fail(PROG, str(e), EXIT_FAILED)
    while not stops.event.is_set() and not session.wait(timeout=0.2):   # (wait() takes the lock start() may
        pass                                                             # still hold: the stop comes first)
    if stops.event.is_set():
        progress.stop()
        print(f"{PROG}: {stops.name}: stopping; unfinished jobs are stored as interrupted (--resume measures "
              f"them); again to exit at once", file=sys.stderr)
        session.interrupt()
        progress.say_interrupted()
    results = list(session.jobs.values())
    comparisons = session.comparisons(results)  # once, for every export and the regression check
    model = session.model_lines(results, comparisons)   # once too: a bootstrap per column
    partial = " (partial: run interrupted)" if stops.received else ""
    for out in args.export:
        try:
            session.export(out, comparisons=comparisons, model=model)
            print(f"{PROG}: wrote {out}{partial}", file=sys.stderr)
        except BooError as e:
            return fail(PROG, str(e))
    if not args.export:
        from ..markdown import render_markdown

        run = session.store.run_info(session.run_id) if session.run_id is not None else None
        sys.stdout.write(render_markdown(results, environment=session.environment(), run=run,
                                         comparisons=comparisons, min_effect=session.config.min_effect,
                                         model=model))
    return all(job_succeeded(r) for r in results), _regressions(comparisons, args.fail_on_regression)


def _exit_code(session, stops, ok: bool, regressions: list[str]) -> int:
    """The closed run's exit code, after a line saying where it is stored (and one per regression). `ok`: every
    job succeeded."""
    if session.failure is not None:  # already said, in one line, when it happened
        return EXIT_FAILED
    print(f"{PROG}: run {session.run_id} stored in {session.store.path}", file=sys.stderr)
    if stops.received:
        return stops.exit_code
    for line in regressions:
        print(f"{PROG}: regression: {line}", file=sys.stderr)
    return EXIT_REGRESSION if regressions else (EXIT_OK if ok else EXIT_FAILED)


def _start(session, stop: threading.Event) -> None:
    """`session.start()`, which stores every job's row first (200,000 rows of a big commands file take seconds), on
    a thread of its own: a stop signal meanwhile is noticed here at once, and the caller's interrupt() makes it
    return. Its error is raised here."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            session.start()
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            errors.append(e)

    starter = threading.Thread(target=run, name="boo-start", daemon=True)
    starter.start()
    while starter.is_alive() and not stop.is_set():
        starter.join(0.2)
    if not starter.is_alive() and errors:
        raise errors[0]


def _kill(pid: int | None) -> None:
    if pid:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _regressions(comparisons: Mapping[tuple[str, str, str], Comparison], pct: float | None) -> list[str]:
    """Variants significantly slower than their baseline by more than pct percent (the torch reference is not
    a variant and never counts)."""
    if pct is None:
        return []
    from ..comparisons import regressions
    from ..results import TORCH

    comparisons = {k: c for k, c in comparisons.items() if k[2] != TORCH}
    return [
        f"{command} [{label}]: {c.ratio:.3f}x the baseline's time (95% CI {c.ci_low:.3f}-{c.ci_high:.3f}, "
        f"p={c.p_value:.2g}) > {1 + pct / 100:.3f}"
        for (target, command, label), c in regressions(comparisons, pct)
    ]


def _commands_of(inputs: Sequence[str]) -> tuple[list, list[str]]:
    """The commands of the run's inputs (files and quoted commands), and the files' bad lines as messages."""
    from ..commands import looks_like_commands_file, parse_invocation, read_commands_file

    commands, bad = [], []
    for item in inputs:
        if not looks_like_commands_file(item):
            commands.append(parse_invocation(item))
            continue
        for line in read_commands_file(item, errors="collect"):
            if line.command is not None:
                commands.append(line.command)
            else:
                bad.append(line.message or f"{item}: a line that does not parse")
    return commands, bad


def _compile_only(args, config) -> int:
    """--compile-only: every (command, variant) compiled into the cache in parallel (compile.preload, as
    boo-driver --preload), nothing measured or stored; exit 1 when a kernel or a line failed."""
    from ..compile.cache import KernelCache
    from ..compile.preload import format_summary, preload
    from ..session.setup import session_target

    try:
        commands, bad = _commands_of(args.inputs)
        cache = KernelCache(config.cache_dir)
    except BooError as e:
        return fail(PROG, str(e))
    if cache.notice:
        print(f"{PROG}: {cache.notice}", file=sys.stderr)
    # the run's own target (BOO's build for the baseline, as a run of these options measures it): what is compiled
    # here is what that run, on a machine with no compiler, finds in the cache
    summary = preload(commands, session_target(config), config.variants, workers=config.compile_workers,
                      cache=cache, timeout_s=config.compile_timeout_s, extra_flags=config.compile_flags)
    for message in bad:
        print(f"invalid {message}", file=sys.stderr)
    print(format_summary(summary) + (f"; {len(bad)} invalid command line(s) not compiled" if bad else ""),
          file=sys.stderr)
    return EXIT_FAILED if (bad or summary.failed) else EXIT_OK


def _dump_dispatches(args, config) -> int:
    """Dump every command's dispatches: compile jobs of a CompilePool (its timeout, stall detection and process
    group kill; Ctrl-C cancels them), each distinct kernel once, reported in the commands' order."""
    from ..commands import looks_like_commands_file, parse_invocation, read_commands_file
    from ..compile.cache import KernelCache
    from ..compile.pool import CompilePool
    from ..targets import parse_target

    target = parse_target(config.target)  # config_from_args resolved it (a detected GPU, else cpu)
    code = EXIT_OK
    try:
        commands = []
        for item in args.inputs:
            if looks_like_commands_file(item):
                commands += read_commands_file(item, errors="raise")
            else:
                commands.append(parse_invocation(item))
    except BooError as e:
        return fail(PROG, str(e))
    cache = KernelCache(config.cache_dir) if config.cache_dir else None
    with CompilePool(workers=config.compile_workers, timeout_s=config.compile_timeout_s, cache=cache) as pool:
        futures = {}
        for command in commands:  # a kernel listed twice is dumped once (two jobs would share its folder)
            func = command.signature.func_name
            if func not in futures:
                futures[func] = pool.submit_dump(command.signature, target, args.dump_dispatches)
        for command in commands:
            func = command.signature.func_name
            try:
                files = futures[func].result()
                print(f"{func}: {len(files)} files in {args.dump_dispatches}", file=sys.stderr)
            except BooError as e:
                print(f"{PROG}: {func}: {e}", file=sys.stderr)
                code = EXIT_FAILED
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Headless only (used by tests and scripts); `boo-tui` itself is boo_tui.cli.main."""
    from .common import add_session_args, glue_flag_values

    p = argparse.ArgumentParser(prog=PROG)
    add_session_args(p)
    add_headless_args(p)
    args = p.parse_args(glue_flag_values(list(sys.argv[1:] if argv is None else argv)))
    args.headless = True
    return run_headless(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
