"""How long reading `aten::` lines takes: a file of N distinct calls (what a capture of a large model gives),
read syntax only (what the dashboard's UI thread does to label rows: no torch) and checked (what the engine
does: the overload resolved and the outputs' shapes found on meta tensors). Re-run on a quiet machine:

    python3 benchmarks/bench_aten_parse.py [--lines 1000]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TEMPLATES = [
    "aten::addmm \"[[{a}], [{b}, 64], [64, {a}], [], []]\" \"['float', 'float', 'float', 'Scalar', 'Scalar']\" "
    "\"[[1], [64, 1], [1, 64], [], []]\" \"['', '', '', '1', '1']\"",
    "aten::conv2d \"[[2, {c}, 16, 16], [8, {c}, 3, 3], [], [], [], [], []]\" "
    "\"['float', 'float', '', 'ScalarList', 'ScalarList', 'ScalarList', 'Scalar']\" "
    "\"[[{s}, 256, 16, 1], [{w}, 9, 3, 1], [], [], [], [], []]\" \"['', '', '', '[1, 1]', '[1, 1]', '[1, 1]', '1']\"",
    "aten::gelu \"[[{a}, {b}], []]\" \"['float', '']\" \"[[{b}, 1], []]\" \"['', '']\"",
    "aten::sum \"[[{a}, {b}], [], [], []]\" \"['float', 'ScalarList', 'Scalar', '']\" \"[[{b}, 1], [], [], []]\" "
    "\"['', '[0]', 'True', '']\"",
]


def lines(n: int) -> list[str]:
    out = []
    for i in range(n):
        a, b, c = i + 1, i % 97 + 8, i % 31 + 1
        out.append(TEMPLATES[i % len(TEMPLATES)].format(a=a, b=b, c=c, s=c * 256, w=c * 9))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=1000)
    args = ap.parse_args()
    from boo_engine.commands import read_commands_file
    from boo_engine.hostcpu import host_cpu_identity

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "calls.txt"
        path.write_text("\n".join(lines(args.lines)) + "\n")
        t0 = time.perf_counter()
        from boo_engine.commands import parse_invocation
        syntax = [parse_invocation(line, check=False) for line in path.read_text().splitlines()]
        t_syntax = time.perf_counter() - t0
        import torch  # noqa: F401 - the engine has it imported already; keep its import out of the figure

        t0 = time.perf_counter()
        rows = read_commands_file(path, errors="collect")
        t_checked = time.perf_counter() - t0
    bad = [r for r in rows if not r.ok]
    print(f"host: {host_cpu_identity()}")
    print(f"{args.lines} distinct aten lines: syntax only {t_syntax:.2f} s ({t_syntax / len(syntax) * 1e3:.2f} ms a "
          f"line), checked {t_checked:.2f} s ({t_checked / len(rows) * 1e3:.2f} ms a line); {len(bad)} refused")


if __name__ == "__main__":
    main()
