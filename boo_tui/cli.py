"""`boo-tui`: the dashboard, or the same session headless with --export / --headless.

Textual is imported only for the interactive dashboard, so headless runs (CI, scripts) start fast and never need
a terminal.
"""
from __future__ import annotations

import argparse
import importlib
import sys
import textwrap
from collections.abc import Sequence

from boo_engine.api import (
    BooError,
    add_headless_args,
    add_session_args,
    checked_stdout,
    config_from_args,
    fail,
    glue_flag_values,
    internal_error,
    run_headless,
    wants_headless,
)

PROG = "boo-tui"


#: `boo-tui NAME ...`: the subcommands, each its own front end in boo_engine/cli/ (imported only when named), with
#: the line `boo-tui --help` shows for it
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "tune": ("boo_engine.cli.tune", "search flags, tiles and formulations for kernels on this machine"),
    "capture": ("boo_engine.cli.capture", "a model's kernels (or a profiler trace's) as a weighted commands file"),
    "model": ("boo_engine.cli.model", "a model end to end: eager torch vs iree_boo, numerics, where the time goes"),
    "peak": ("boo_engine.cli.peak", "this machine's measured peaks (GFLOP/s per dtype, memory GB/s)"),
    "compare": ("boo_engine.cli.compare", "two stored runs compared, without measuring again"),
    "merge": ("boo_engine.cli.merge", "results databases merged into one"),
}


def build_parser() -> argparse.ArgumentParser:
    width = max(len(name) for name in SUBCOMMANDS)
    p = argparse.ArgumentParser(
        prog=PROG,
        description=textwrap.fill("Benchmark IREE-compiled kernels from MIOpenDriver commands: a live dashboard, or "
                                  "headless with --export results.{csv,json,md}.", 79),
        epilog="subcommands (boo-tui NAME --help for each):\n" + "\n".join(
            f"  {name:<{width}}  {line}" for name, (_, line) in SUBCOMMANDS.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    add_session_args(p)
    add_headless_args(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] and argv[0] in SUBCOMMANDS:
        module = importlib.import_module(SUBCOMMANDS[argv[0]][0])
        return int(module.main(argv[1:]))
    args = build_parser().parse_args(glue_flag_values(argv))
    try:
        with checked_stdout():
            return _main(args)
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # noqa: BLE001 - a bug of ours: one line, the traceback on request
        return internal_error(PROG, e)


def _main(args: argparse.Namespace) -> int:
    if wants_headless(args):
        return run_headless(args)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return fail(PROG, "no terminal for the dashboard: use --export FILE (or --headless) to run without the UI")
    try:
        config = config_from_args(args)
    except BooError as e:
        return fail(PROG, str(e))
    from boo_tui.app import run_app

    return run_app(config, list(args.inputs))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
