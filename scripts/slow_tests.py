#!/usr/bin/env python3
"""Write tests/slow_tests.txt from a whole-suite run's JUnit XML: every test (all its parameters together) that took
more than --over seconds, so that `pytest -m "not slow"` (the fast subset, README) stays quick.

    python3 -m pytest --junitxml=/tmp/suite.xml            # the whole suite, once
    python3 scripts/slow_tests.py /tmp/suite.xml [--over 3] [--budget 180]

Prints the fast subset's total time in that run; with --budget, lowers --over until the fast subset fits it.
"""
from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "slow_tests.txt"


def node_id(case: ET.Element) -> str:
    """pytest's node id of a JUnit testcase, without its parameters."""
    parts = case.get("classname", "").split(".")
    # "tests.test_x" or "tests.test_x.TestClass": the module is the first part named test_*
    i = next(k for k, p in enumerate(parts) if p.startswith("test_"))
    path = "/".join(parts[: i + 1]) + ".py"
    return "::".join([path, *parts[i + 1:], case.get("name", "").split("[", 1)[0]])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("junit", nargs="+", help="a whole-suite run's JUnit XML; then, optionally, runs of the fast "
                    "subset (`-m 'not slow'`): a test slow there joins the list too (a module's fixture that the "
                    "first, slow, test paid for is paid by the next one once that is left out)")
    ap.add_argument("--over", type=float, default=3.0, help="a test slower than this (s) is slow")
    ap.add_argument("--budget", type=float, default=None, help="lower --over until the fast subset takes <= this")
    opts = ap.parse_args()
    per_test: dict[str, float] = defaultdict(float)
    worst: dict[str, float] = defaultdict(float)
    for case in ET.parse(opts.junit[0]).getroot().iter("testcase"):
        t = float(case.get("time") or 0)
        nid = node_id(case)
        per_test[nid] += t
        worst[nid] = max(worst[nid], t)
    #: files whose tests share a fixture a slow test paid for: slow in a fast subset's run but not in the whole
    #: suite's, a test there pays what its left-out neighbour used to; the whole file is slow
    shared: set[str] = set()
    for later in opts.junit[1:]:
        for case in ET.parse(later).getroot().iter("testcase"):
            nid = node_id(case)
            t = float(case.get("time") or 0)
            if t > opts.over and worst[nid] <= opts.over:
                shared.add(nid.split("::", 1)[0])
            worst[nid] = max(worst[nid], t)
    total = sum(per_test.values())
    over = opts.over
    while True:
        slow = sorted(n for n in per_test if worst[n] > over or n.split("::", 1)[0] in shared)
        fast = total - sum(per_test[n] for n in slow)
        if opts.budget is None or fast <= opts.budget or over < 0.2:
            break
        over *= 0.8
    OUT.write_text(f"# tests over {over:.2f} s (any parameter) in a whole-suite run of {total / 60:.1f} min: "
                   f"scripts/slow_tests.py; the rest took {fast:.0f} s\n" + "".join(f"{n}\n" for n in slow))
    print(f"{len(slow)} of {len(per_test)} tests slow (over {over:.2f} s): they took {total - fast:.0f} s, the fast "
          f"subset {fast:.0f} s of {total:.0f} s; wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
