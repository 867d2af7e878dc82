"""`boo-tui merge A.db B.db ... -o ALL.db [--force]`: results databases (other machines, other days) into one,
for history and `boo-tui compare` across them (boo_engine/store/merge.py says what is copied and how).

Exit codes: 0 merged (a line on stderr counts what was added); 2 usage errors: an input that is missing, not a
results database, damaged or of a newer schema; an existing output without --force (which merges into it);
nothing is written then, and a failed merge leaves no partial output.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .common import RaisingParser
from .exits import EXIT_OK, run_subcommand

PROG = "boo-tui merge"


def build_parser() -> argparse.ArgumentParser:
    p = RaisingParser(prog=PROG, allow_abbrev=False,
                      description="Merge results databases into one: runs, environments, results and every raw "
                                  "sample, tunes and peaks; ids remapped, runs already in the output skipped (merging "
                                  "twice adds nothing).")
    p.add_argument("inputs", nargs="+", metavar="DB", help="results databases to merge")
    p.add_argument("-o", "--output", required=True, metavar="ALL.db", help="the merged database")
    p.add_argument("--force", action="store_true",
                   help="merge into OUTPUT when it exists (its runs are kept; without --force it is refused)")
    return p


def _main(args: argparse.Namespace) -> int:
    from ..store.merge import merge_databases

    summary = merge_databases(args.inputs, args.output, force=args.force)
    for note in summary.notes:
        print(f"{PROG}: note: {note}", file=sys.stderr)
    print(f"{PROG}: {summary.line()}", file=sys.stderr)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    return run_subcommand(PROG, build_parser(), _main, argv)
