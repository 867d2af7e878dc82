"""`boo-tui peak`: this machine's measured peaks (GFLOP/s per dtype, memory GB/s) beside the theoretical ones.

Shows what the results database (or the per-machine file) holds for this machine, target and thread count, and
measures when nothing is stored or with --remeasure (~10 s on a 2-core CPU). The same peaks give every result
its roofline (`roofline_us`, `pct_roofline`).

Exit codes: 0 shown; 2 a bad argument or the peaks could not be measured (one line on stderr).
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .. import locations
from .common import RaisingParser, UsageError
from .exits import EXIT_OK, run_subcommand

PROG = "boo-tui peak"


def build_parser() -> argparse.ArgumentParser:
    p = RaisingParser(prog=PROG, allow_abbrev=False,
                description="This machine's peaks: the best GFLOP/s per dtype (IREE and torch matmuls) and memory "
                            "GB/s (streaming copies), measured once per machine and stored; with the theoretical "
                            "figures (CPU features x clock, GPU datasheets).")
    p.add_argument("--target", default=None,
                   help="cpu, hip:gfx942, cuda:sm_80, ... (default: a detected GPU, else cpu, as a run)")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="CPU threads (the peaks of N threads, as `boo-tui --threads N` measures; default 1)")
    p.add_argument("--db", default=None, metavar="PATH", help=locations.DB_HELP)
    p.add_argument("--remeasure", action="store_true", help="measure again, whatever is stored")
    return p


def _fmt(v: float | None) -> str:
    return "unknown" if v is None else f"{v:,.1f}"


def table(peaks: object) -> str:
    """The peaks as a plain-text table (what `boo-tui peak` prints)."""
    from ..limits import Peaks

    assert isinstance(peaks, Peaks)
    rows = [("peak", "measured", "by", "theoretical", "% of theoretical")]
    for p in peaks.entries:
        what = f"{p.dtype} GFLOP/s" if p.kind == "compute" else "memory GB/s"
        pct = p.pct_of_theoretical
        rows.append((what, _fmt(p.value), p.source, _fmt(p.theoretical), "-" if pct is None else f"{pct:.0f}%"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i in (0, 2) else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    how = {"measured": f"measured now in {peaks.seconds or 0:.1f} s", "database": "stored in the results database",
           "file": "remembered for this machine"}.get(peaks.how, peaks.how)
    head = [f"machine: {peaks.machine_key}", f"target {peaks.target}, {peaks.threads} thread(s); {how} "
            f"(measured {peaks.measured_at})"]
    foot = [f"theoretical: {peaks.basis}"] if peaks.basis else []
    return "\n".join(head + [""] + lines + [""] + foot)


def _main(args: argparse.Namespace) -> int:
    from ..limits import get_peaks, take_notices
    from ..store import Store, default_db_path
    from ..targets import default_target, parse_target

    if args.threads < 1:
        raise UsageError(f"--threads {args.threads}: give at least 1")
    target = parse_target(args.target) if args.target is not None else default_target()
    if not target.can_run():
        asked = f"{target.kind}:{target.runs_on}" if target.runs_on else target.name
        raise UsageError(f"--target {asked}: no such device on this machine")
    store = Store(args.db or default_db_path())
    try:
        print(f"{PROG}: looking up / measuring the peaks of {target.name} ({args.threads} thread(s))...",
              file=sys.stderr)
        peaks = get_peaks(target, args.threads, store, remeasure=args.remeasure)
    finally:
        store.close()
    for note in take_notices():
        print(f"{PROG}: warning: {note}", file=sys.stderr)
    print(table(peaks))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    return run_subcommand(PROG, build_parser(), _main, argv)
