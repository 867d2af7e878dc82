"""`boo-tui compare A B`: two stored runs compared, from one database or from two (other machines, other days).

    boo-tui compare 3 7                                  # runs 3 and 7 of --db (default $BOO_DB / ./boo-results.db)
    boo-tui compare old.db new.db --export cmp.md        # each file's last run
    boo-tui compare laptop.db:4 ci.db:12 --fail-on-regression 5

Nothing is compiled or measured (the compiler is never imported): the stored samples are compared with the
variants' statistics (boo_engine/history/runs.py). stdout carries the Markdown table, diagnostics go to stderr.
Exit codes: 0 compared; 3 with --fail-on-regression PCT, a result of B is significantly slower than A's by more
than PCT percent; 2 usage errors (no such file or run, not a results database, a newer schema, nothing in common,
a bad export path).
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .common import RaisingParser, UsageError
from .exits import EXIT_OK, EXIT_REGRESSION, run_subcommand

PROG = "boo-tui compare"


def build_parser() -> argparse.ArgumentParser:
    p = RaisingParser(prog=PROG, allow_abbrev=False,
                      description="Compare two stored runs (B against A: ratio < 1 means B is faster). Each run is "
                                  "RUN_ID (in --db), PATH.db:RUN_ID, or PATH.db (its last run).")
    p.add_argument("a", metavar="A", help="the reference run")
    p.add_argument("b", metavar="B", help="the run compared with it")
    p.add_argument("--export", action="append", default=[], metavar="OUT",
                   help="write the comparison to OUT (.md, .csv or .json); repeatable")
    p.add_argument("--fail-on-regression", type=float, default=None, metavar="PCT",
                   help="exit 3 when a result of B is significantly slower than A's by more than PCT percent")
    p.add_argument("--min-effect", type=float, default=None, metavar="PCT",
                   help="smallest change called faster/slower, in percent (default: the one run B was measured with)")
    p.add_argument("--db", default=None, metavar="PATH",
                   help="the database of a side given as a bare run id (default $BOO_DB or ./boo-results.db)")
    return p


def _main(args: argparse.Namespace) -> int:
    from .. import locations
    from ..exporters import check_export_path
    from ..history import compare_refs, resolve_run
    from ..history.render import FORMATS, render_markdown, write
    from ..history.runs import regressed

    sides = [side.rsplit(":", 1)[0] if ":" in side else side for side in (args.a, args.b)]
    databases = [locations.db_path(args.db), *(f for f in sides if not f.isdigit())]
    for i, out in enumerate(args.export):
        check_export_path(out, formats=FORMATS, databases=databases, others=args.export[:i])
    if args.min_effect is not None and not 0 <= args.min_effect < 100:
        raise UsageError(f"--min-effect {args.min_effect:g}: give a percentage in [0, 100)")
    if args.fail_on_regression is not None and args.fail_on_regression < 0:
        raise UsageError(f"--fail-on-regression {args.fail_on_regression:g}: give a percentage >= 0")
    db = args.db or locations.db_path()
    a, b = resolve_run(args.a, db), resolve_run(args.b, db)
    cmp = compare_refs(a, b, min_effect=None if args.min_effect is None else args.min_effect / 100.0,
                       workers=min(os.cpu_count() or 1, 8))
    for out in args.export:
        write(cmp, out)
        print(f"{PROG}: wrote {out}", file=sys.stderr)
    if not args.export:
        sys.stdout.write(render_markdown(cmp))
    for d in cmp.differences:
        print(f"{PROG}: differs: {d.what}: {d.a} -> {d.b}", file=sys.stderr)
    if args.fail_on_regression is None:
        return EXIT_OK
    found = regressed(cmp, args.fail_on_regression)
    for (_target, command, label), c in found:
        print(f"{PROG}: regression: {command} [{label}]: {c.ratio:.3f}x run {cmp.a.ref.label}'s time (95% CI "
              f"{c.ci_low:.3f}-{c.ci_high:.3f}, p={c.p_value:.2g}) > {1 + args.fail_on_regression / 100:.3f}",
              file=sys.stderr)
    return EXIT_REGRESSION if found else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    return run_subcommand(PROG, build_parser(), _main, argv)
