"""`boo-tui`: the dashboard, or the same session headless with --export / --headless.

Textual is imported only for the interactive dashboard, so headless runs (CI, scripts) start fast and never need
a terminal.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from boo_engine.cli.common import add_session_args, config_from_args, fail, glue_flag_values, internal_error
from boo_engine.cli.headless import add_headless_args, run_headless, wants_headless
from boo_engine.cli.output import checked_stdout
from boo_engine.errors import BooError

PROG = "boo-tui"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Benchmark IREE-compiled kernels from MIOpenDriver commands: a live dashboard, or headless "
                    "with --export results.{csv,json,md}.",
        allow_abbrev=False,
    )
    add_session_args(p)
    add_headless_args(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["tune"]:   # `boo-tui tune ...`: the autotuner (headless; boo_engine/cli/tune.py)
        from boo_engine.cli.tune import main as tune_main

        return tune_main(argv[1:])
    if argv[:1] == ["capture"]:   # `boo-tui capture ...`: a model's kernels as a commands file (cli/capture.py)
        from boo_engine.cli.capture import main as capture_main

        return capture_main(argv[1:])
    if argv[:1] == ["model"]:   # `boo-tui model ...`: a model end to end, eager vs iree_boo (cli/model.py)
        from boo_engine.cli.model import main as model_main

        return model_main(argv[1:])
    if argv[:1] == ["peak"]:   # `boo-tui peak ...`: this machine's measured peaks (cli/peak.py)
        from boo_engine.cli.peak import main as peak_main

        return peak_main(argv[1:])
    if argv[:1] == ["compare"]:   # `boo-tui compare A B`: two stored runs (cli/compare.py; no compiler import)
        from boo_engine.cli.compare import main as compare_main

        return compare_main(argv[1:])
    if argv[:1] == ["merge"]:   # `boo-tui merge A.db B.db -o ALL.db`: databases into one (cli/merge.py)
        from boo_engine.cli.merge import main as merge_main

        return merge_main(argv[1:])
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
