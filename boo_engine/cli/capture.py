"""`boo-tui capture`: the kernels a model runs, as a commands file.

    boo-tui capture MODEL --input SHAPE[:DTYPE] [--input ...] [--backward] [--layout nhwc] [--eval] [--threads N]
                    -o FILE
    boo-tui capture --trace TRACE.json -o FILE

MODEL is `path/to/file.py:factory` or `package.module:factory`, a callable returning a torch.nn.Module. Exit codes:
0 written, 2 bad input (one line on stderr: a model that does not import or run, a bad --input, a trace that is
not one, an output that cannot be written), 1 a bug of ours.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from .common import RaisingParser, UsageError
from .exits import EXIT_OK, run_subcommand

PROG = "boo-tui capture"


def build_parser() -> argparse.ArgumentParser:
    p = RaisingParser(prog=PROG, allow_abbrev=False,
                description="Record the kernels a model runs (or a torch-profiler trace holds) as a commands file: "
                            "MIOpenDriver lines where the grammar can say the call, BOO's aten:: lines otherwise, "
                            "each with its call count and share of the time.")
    p.add_argument("model", nargs="?", metavar="MODEL",
                   help="path/to/file.py:factory or package.module:factory (returns a torch.nn.Module)")
    p.add_argument("--input", action="append", default=[], metavar="SHAPE[:DTYPE]",
                   help="one model input, e.g. 8x3x224x224 or 2x128:int64 (float32 when no dtype); repeatable, "
                        "in the order forward() takes them")
    p.add_argument("--backward", action="store_true",
                   help="also record the backward pass of the sum of the outputs")
    p.add_argument("--layout", choices=["nhwc"], default=None,
                   help="nhwc: convert the model and 4-D/5-D inputs to channels-last first (5-D: channels_last_3d)")
    p.add_argument("--eval", action="store_true", help="call model.eval() first (default: as the factory built it)")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="torch CPU threads while capturing (default 1, what boo-tui measures with by default): "
                        "measure the file with the same --threads")
    p.add_argument("--trace", metavar="TRACE.json", default=None,
                   help="read a torch-profiler chrome trace (record_shapes=True) instead of running a model")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the commands file to write")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return run_subcommand(PROG, build_parser(), _main, argv)


def check_output(path: str) -> None:
    """An output that cannot be written is refused before any work (a capture can take a while)."""
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"-o {path}: is a directory")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"-o {path}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise UsageError(f"-o {path}: not writable")


def _main(args: argparse.Namespace) -> int:
    from ..capture import model_commands, parse_input, trace_commands
    from ..fsutil import atomic_write

    if args.trace is not None:
        if args.model is not None or args.input or args.backward or args.layout or args.eval or args.threads:
            raise UsageError("--trace reads a recorded trace: give no MODEL, --input, --backward, --layout, --eval or "
                             "--threads")
        check_output(args.output)
        text = trace_commands(args.trace)
    else:
        if args.model is None:
            raise UsageError("give a MODEL (path/to/file.py:factory or package.module:factory) or --trace FILE")
        inputs = [parse_input(s) for s in args.input]
        if args.threads is not None and args.threads < 1:
            raise UsageError(f"--threads {args.threads}: give at least 1")
        if ":" not in args.model:
            raise UsageError(f"MODEL {args.model[:120]!r}: expected path/to/file.py:factory or "
                             "package.module:factory")
        check_output(args.output)
        text = model_commands(args.model, inputs, backward=args.backward, layout=args.layout, eval_mode=args.eval,
                              threads=1 if args.threads is None else args.threads)
    try:
        atomic_write(args.output, text)
    except OSError as e:
        raise UsageError(f"-o {args.output}: cannot write: {e.strerror or e}") from None
    print(f"{PROG}: wrote {args.output} ({sum(1 for ln in text.splitlines() if ln and not ln.startswith('#'))} "
          "commands)", file=sys.stderr)
    return EXIT_OK
