"""`boo-tui tune`: search faster configurations of the given kernels on this machine, headless, with a rich
progress display on stderr; writes DIR/tuned.mlir, DIR/tuned.toml and DIR/report.md.

    boo-tui tune FILE_OR_COMMAND... [--target T] [--out DIR] [--budget N] [--time-budget S] [--db PATH]
                 [--resume [ID]] [--seed N] [--min-effect PCT]
    boo-tui tune --defaults FILE_OR_COMMAND...   measure the per-op-class flags for this machine

Exit codes: 0 done (whether or not anything was faster), 2 usage errors, 1 a failure, 128+N stopped by signal N
(the tune stays resumable: `--resume`).
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from .. import locations
from ..errors import BooError
from .common import RAY_HELP, UsageError, check_cache_root, ray_address_arg
from .exits import EXIT_FAILED, EXIT_OK, fail, guarded

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from ..tune.events import TuneEvent
    from ..tune.records import TunedKernel
    from ..tune.search import Tuner

PROG = "boo-tui tune"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, allow_abbrev=False,
        description="Search tile sizes, compiler flags and formulations for the given kernels on this machine; "
                    "keep a configuration only when it is significantly faster and numerically right.")
    p.add_argument("inputs", nargs="*", metavar="FILE_OR_COMMAND",
                   help="commands files (.txt/.tsv) and/or quoted MIOpenDriver command lines")
    p.add_argument("--target", default=None, help="cpu (default without a GPU), hip:gfx942, cuda:sm_80 ...")
    p.add_argument("--out", default="tuned", metavar="DIR", help="where tuned.mlir, tuned.toml, report.md go")
    p.add_argument("--budget", type=int, default=32, metavar="N",
                   help="candidates per kernel: global choices + tile configurations (default 32)")
    p.add_argument("--time-budget", type=float, default=None, metavar="S",
                   help="stop proposing candidates after S seconds in all (what was found is kept)")
    p.add_argument("--seed", type=int, default=0, help="search and bootstrap seed: same seed, same candidates")
    p.add_argument("--min-effect", type=float, default=3.0, metavar="PCT",
                   help="a winner must be at least PCT%% faster, significantly (default 3)")
    p.add_argument("--batch", type=int, default=8, metavar="N", help="candidates compiled then screened together")
    p.add_argument("--final-time", type=float, default=1.5, metavar="S",
                   help="measuring time of the winner and the baseline each in the final (default 1.5)")
    p.add_argument("--db", default=None, metavar="PATH", help=locations.DB_HELP)
    p.add_argument("--cache-dir", default=None, metavar="DIR", help=locations.CACHE_HELP)
    p.add_argument("--compile-workers", type=int, default=None, metavar="N",
                   help="compile processes working at once (default: one per core)")
    p.add_argument("--threads", type=int, default=1, metavar="N", help="CPU threads per kernel (default 1)")
    p.add_argument("--ray", default=None, metavar="ADDRESS", help=RAY_HELP)
    p.add_argument("--resume", nargs="?", const="last", default=None, metavar="TUNE_ID",
                   help="continue a stopped tune (the last one without an id): finished kernels are kept")
    p.add_argument("--try-flags", action="append", default=[], metavar="'FLAGS'",
                   help="a set of iree-compile flags to try on every kernel, beside the built-in choices (repeatable)")
    p.add_argument("--top", type=int, default=None, metavar="N",
                   help="tune only the N commands with the largest share of a captured model's time (its "
                        "`# boo-tui: calls= share=` lines): the kernels that matter most to the model")
    p.add_argument("--defaults", action="store_true",
                   help="measure the per-op-class compiler flags for THIS machine and keep the winners as its defaults")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    return guarded(PROG, lambda: _main(args, list(argv) if argv is not None else sys.argv[2:]))


def _check(args: argparse.Namespace) -> str | None:
    if args.budget < 1:
        return f"--budget {args.budget}: give at least 1 candidate per kernel"
    if args.time_budget is not None and args.time_budget <= 0:
        return f"--time-budget {args.time_budget:g}: give a positive number of seconds"
    if not 0 <= args.min_effect < 100:
        return f"--min-effect {args.min_effect:g}: a percentage in [0, 100)"
    if args.batch < 1 or args.threads < 1 or (args.compile_workers is not None and args.compile_workers < 1):
        return "--batch, --threads and --compile-workers must be at least 1"
    if args.final_time <= 0:
        return "--final-time must be positive"
    for f in args.try_flags:
        try:
            words = shlex.split(f)
        except ValueError as e:
            return f"--try-flags {f!r}: {e}"
        if not words or any(not w.startswith("-") for w in words):
            return f"--try-flags {f!r}: expected iree-compile flags (--flag=value ...)"
    if not args.inputs and args.resume is None:
        return "nothing to tune: give commands files or command lines (or --resume)"
    if args.top is not None and args.top < 1:
        return f"--top {args.top}: give at least 1"
    return None


def top_by_share(inputs: Sequence[str], n: int) -> tuple[list[str], float]:
    """The `n` commands of the commands files among `inputs` with the largest share (each once, the first of
    equal ones), and the share of the captured compute they hold together. UsageError when no line has a weight."""
    from ..commands import looks_like_commands_file, read_commands_file

    weighted: dict[str, float] = {}
    for item in inputs:
        if not looks_like_commands_file(item):
            continue
        for line in read_commands_file(item, errors="collect"):
            if line.command is not None and line.share is not None:
                weighted[line.text] = weighted.get(line.text, 0.0) + line.share
    if not weighted:
        raise UsageError(f"--top {n}: no command of {' '.join(inputs)} has a weight (the `# boo-tui: calls=N "
                         f"share=P%` lines `boo-tui capture` writes)")
    top = sorted(weighted, key=lambda text: -weighted[text])[:n]
    return top, sum(weighted[text] for text in top)


def _main(args: argparse.Namespace, argv: list[str]) -> int:
    problem = _check(args)
    if problem:
        return fail(PROG, problem)
    check_cache_root(args.cache_dir)
    if args.target:
        from ..targets import parse_target

        parse_target(args.target)   # TargetError: one line, before anything starts
    if args.defaults:
        return _run_defaults(args)
    try:   # before any work: candidates' specs are written there as the search goes, the results at the end
        os.makedirs(args.out, exist_ok=True)
        if not os.access(args.out, os.W_OK):
            raise PermissionError(f"{args.out} is not writable")
    except OSError as e:
        return fail(PROG, f"--out {args.out}: {e.strerror or e}")
    from ..tune.search import Tuner, TuneSettings

    if args.top is not None and args.resume is None:
        args.inputs, held = top_by_share(args.inputs, args.top)
        print(f"{PROG}: tuning the {len(args.inputs)} command(s) with the largest share: {held:.1f}% of the "
              f"captured compute", file=sys.stderr)

    settings = TuneSettings(
        target=args.target, out_dir=args.out, budget=args.budget, time_budget_s=args.time_budget, seed=args.seed,
        min_effect=args.min_effect / 100.0, batch=args.batch, final_s=args.final_time, threads=args.threads,
        db_path=args.db, cache_dir=args.cache_dir, compile_workers=args.compile_workers, resume=args.resume,
        command_line="boo-tui tune " + shlex.join(argv), try_flags=tuple(args.try_flags),
        ray_address=ray_address_arg(args.ray))
    view = _TuneProgress()
    tuner = Tuner(settings, listener=view.on_event)
    return _run_stoppable(tuner, args, view)


def _run_stoppable(tuner: Tuner, args: argparse.Namespace, view: _TuneProgress) -> int:
    from .signals import StopSignals

    stops = StopSignals(PROG, hard_exit=lambda: tuner.session.kill_children() if tuner.session else None).install()
    stops.raising = False
    outcome: dict[str, TunedKernel] = {}
    error: list[BaseException] = []

    def work() -> None:
        try:
            outcome.update(tuner.run(args.inputs))
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            error.append(e)

    thread = threading.Thread(target=work, name="boo-tune", daemon=True)
    thread.start()   # the progress display starts with the first event: an input error is one line, alone
    try:
        while thread.is_alive():
            thread.join(0.2)
            if stops.event.is_set() and not tuner.stopped:
                view.say(f"{PROG}: {stops.name}: stopping; what was measured is stored (--resume continues); "
                         "again to exit at once")
                tuner.stop()
    finally:
        view.stop()
        stops.restore()
    if error:
        if isinstance(error[0], BooError):
            return fail(PROG, str(error[0]))
        raise error[0]
    return _write(tuner, args, view, stops.exit_code if stops.received else EXIT_OK)


def _write(tuner: Tuner, args: argparse.Namespace, view: _TuneProgress, code: int) -> int:
    from ..tune.report import write_outputs

    target = tuner.session.target.name if tuner.session is not None else (args.target or "cpu")
    try:
        paths = write_outputs(args.out, tuner.kernels, tuner.environment, target=target,
                              settings=tuner.settings.to_dict())
    except OSError as e:
        return fail(PROG, f"cannot write the results to {args.out}: {e.strerror or e}", EXIT_FAILED)
    for line in summary_lines(tuner.kernels):
        print(line)
    for p in paths:
        print(f"{PROG}: wrote {p}", file=sys.stderr)
    if tuner.tune_id is not None:
        where = tuner.session.store.path if tuner.session is not None else args.db
        print(f"{PROG}: tune {tuner.tune_id} stored in {where}", file=sys.stderr)
    return code


def summary_lines(kernels: Mapping[str, TunedKernel]) -> list[str]:
    out = []
    for k in kernels.values():
        if k.status == "improved":
            out.append(f"{k.func_name}: {k.ratio:.3f}x [{k.ci_low:.3f}, {k.ci_high:.3f}] "
                       f"({k.baseline_us:.1f} -> {k.best_us:.1f} us) {k.message.split(':')[0]}")
        else:
            out.append(f"{k.func_name}: {k.message or k.status}")
    return out


def _run_defaults(args: argparse.Namespace) -> int:
    try:
        from ..tune.defaults import run_defaults
    except ImportError:
        return fail(PROG, "--defaults is not available in this build", EXIT_FAILED)
    from ..config import SessionConfig

    config = SessionConfig(target=args.target, seed=args.seed, min_effect=args.min_effect / 100.0,
                           db_path=args.db, cache_dir=args.cache_dir, compile_workers=args.compile_workers,
                           threads=args.threads, command_line="boo-tui tune --defaults")
    return int(run_defaults(list(args.inputs), config))


class _TuneProgress:
    """rich on stderr: one bar over the kernels, a status line of the kernel being searched, and one line per
    kernel as it finishes. Fed from the tuner's thread."""

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(stderr=True)
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._stopped = False
        self._lock = threading.Lock()

    def _start(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(TextColumn("[bold]tune"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                  TextColumn("{task.description}"), console=self.console, transient=False)
        self._task = self._progress.add_task("starting", total=None)
        self._progress.start()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            if self._progress is not None:
                self._progress.stop()
                self._progress = None

    def say(self, line: str) -> None:
        self.console.print(line, highlight=False, markup=False, soft_wrap=True)

    def on_event(self, event: TuneEvent) -> None:
        from ..tune.events import KernelTuned, TuneLog, TuneUpdate

        with self._lock:
            if self._progress is None and not self._stopped:
                self._start()
            p, task = self._progress, self._task
            if isinstance(event, TuneUpdate) and p is not None and task is not None:
                best = f", best {event.best_ratio:.3f}x" if event.best_ratio else ""
                p.update(task, total=event.total, completed=event.index - 1,
                         description=f"{event.func_name[:48]} {event.stage}: {event.tried} tried, "
                                     f"{event.measured} measured, {event.failed} pruned{best}")
            elif isinstance(event, KernelTuned):
                if p is not None and task is not None:
                    p.update(task, total=event.total, completed=event.index)
                k = event.kernel
                self.say(f"[{event.index}/{event.total}] {summary_lines({k.func_name: k})[0]}")
            elif isinstance(event, TuneLog):
                self.say(f"{event.level}: {event.message}")


__all__ = ["EXIT_FAILED", "EXIT_OK", "main"]
