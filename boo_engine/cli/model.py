"""`boo-tui model`: a model end to end, eager vs the iree_boo torch.compile backend (vs it with each variant).

    boo-tui model MODEL --input SHAPE[:DTYPE]... [--backward] [--eval] [--variant V]... [--variants-file F]...
                  [--iter N] [--min-time S] [--rounds R] [--threads N] [--no-numerics] [--min-effect PCT]
                  [--db PATH] [--export FILE]... [--fail-on-regression PCT]

MODEL is `path/to/file.py:factory` or `package.module:factory` (as in `boo-tui capture`). stdout: the Markdown
table (ratio vs the iree_boo baseline with CI and verdict, numerics) and, per compiled column, where a pass's time
goes. stderr: progress. The run is stored in the results DB (the dashboard's history opens it: a model is a row,
its detail pane the breakdown). Exit codes: 0 done, 1 a column failed, 2 usage errors (bad model, input,
variant, export path), 3 a variant significantly slower than the baseline by more than --fail-on-regression PCT.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import locations
from .common import RaisingParser, UsageError
from .exits import EXIT_FAILED, EXIT_OK, EXIT_REGRESSION, run_subcommand

if TYPE_CHECKING:  # pragma: no cover
    from ..markdown import Comparisons
    from ..modelbench import ModelJob
    from ..results import JobResult
    from ..variants import Variant

PROG = "boo-tui model"
#: what the iree_boo column ran, per --kernels
KERNEL_NOTES = {"best": "best, each kernel in the best known configuration for this machine (a tune's winner "
                        "measured here, else this machine's tune --defaults table, else the built-in rules)",
                "boo": "boo, each kernel as iree-turbine's BOO builds it (its export, BOO's flags)"}


def build_parser() -> argparse.ArgumentParser:
    p = RaisingParser(prog=PROG, allow_abbrev=False,
                      description="Measure a model end to end: eager torch vs torch.compile(backend='iree_boo') "
                                  "(our kernels for the convolutions, layer norms and matmuls), with each variant, "
                                  "numerics against eager and where the time goes per kernel.")
    p.add_argument("model", metavar="MODEL", help="path/to/file.py:factory or package.module:factory")
    p.add_argument("--input", action="append", default=[], metavar="SHAPE[:DTYPE]",
                   help="one model input, e.g. 8x3x32x32 or 2x128:bfloat16; repeatable, in forward()'s order")
    p.add_argument("--backward", action="store_true", help="a pass is forward + backward of the sum of the outputs")
    p.add_argument("--eval", action="store_true", help="call model.eval() first")
    p.add_argument("--kernels", choices=["best", "boo"], default=None,
                   help="the iree_boo column's kernels: best (the best known kernels for this machine, the default; "
                        "also $BOO_KERNELS) or boo (each kernel as iree-turbine's BOO builds it)")
    p.add_argument("--variant", action="append", default=[], metavar="V",
                   help="a variant of the iree_boo column (as boo-tui --variant: NAME=spec.mlir, NAME='--flag ...')")
    p.add_argument("--variants-file", action="append", default=[], metavar="FILE",
                   help="variants from a TOML file (what boo-tui tune writes: tuned.toml)")
    p.add_argument("--iter", type=int, default=50, metavar="N", help="samples per column (default 50)")
    p.add_argument("--min-time", type=float, default=1.0, metavar="S",
                   help="sample each column for at least S seconds in all (default 1.0)")
    p.add_argument("--rounds", type=int, default=5, metavar="R",
                   help="interleaved rounds the samples are taken in (default 5)")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="CPU threads for eager torch and for our kernels alike (default 1)")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="seed of the random inputs")
    p.add_argument("--no-numerics", action="store_true", help="skip comparing outputs (and gradients) with eager")
    p.add_argument("--min-effect", type=float, default=None, metavar="PCT",
                   help="smallest ratio change called faster/slower (default the tool's, 2%%)")
    p.add_argument("--fail-on-regression", type=float, default=None, metavar="PCT",
                   help="exit 3 when a variant is significantly slower than the iree_boo baseline by more than PCT%%")
    p.add_argument("--db", default=None, metavar="PATH", help=locations.DB_HELP)
    p.add_argument("--export", action="append", default=[], metavar="FILE", help="also write .csv, .json or .md")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return run_subcommand(PROG, build_parser(), _main, argv)


def _main(args: argparse.Namespace) -> int:
    """Measure the model's columns, store the run, then export and print it: the exit code."""
    from ..capture import parse_input
    from ..compare import DEFAULT_MIN_EFFECT
    from ..comparisons import compare_results
    from ..environment import collect_environment
    from ..exporters import export_results
    from ..markdown import render_markdown
    from ..modelbench import ModelJob, bench_model
    from ..results import INTERRUPTED

    _check_args(args)
    min_effect = DEFAULT_MIN_EFFECT if args.min_effect is None else args.min_effect / 100.0
    inputs = tuple(parse_input(s) for s in args.input)
    variants, kernels = _variants(args)
    job = ModelJob(args.model, inputs, backward=args.backward, eval_mode=args.eval, threads=args.threads,
                   seed=args.seed)
    results = bench_model(job, variants, iters=args.iter, min_time_s=args.min_time or None, rounds=args.rounds,
                          numerics=not args.no_numerics, progress=_say)
    comparisons = compare_results(results, min_effect=min_effect)
    env = collect_environment("cpu")
    line = (" ".join([PROG, *map(shlex.quote, sys.argv[2:])]) if sys.argv[1:2] == ["model"]
            else f"{PROG} {job.command}")
    run_info: dict[str, Any] = {"command_line": line, "target": "cpu"}
    interrupted = any(r.status == INTERRUPTED for r in results)
    run_info["id"] = _store_run(args, job, variants, results, env, line, interrupted)
    for path in args.export:
        export_results(path, results, environment=env, run=run_info, comparisons=comparisons, min_effect=min_effect)
    text = render_markdown(results, environment=env, run=run_info, comparisons=comparisons, min_effect=min_effect)
    sys.stdout.write(text)
    _print_kernels(results, kernels)
    return _exit_code(args, results, comparisons, interrupted, run_info.get("id"))


def _check_args(args: argparse.Namespace) -> None:
    """The usage checks, before anything is measured: MODEL's form, the counts and times, the export paths."""
    from ..exporters import check_export_path
    from ..store import default_db_path

    if ":" not in args.model:
        raise UsageError(f"MODEL {args.model[:120]!r}: expected path/to/file.py:factory or package.module:factory")
    for name in ("iter", "rounds", "threads"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} {getattr(args, name)}: give at least 1")
    if args.min_time < 0:
        raise UsageError(f"--min-time {args.min_time}: give a number >= 0")
    model_file = args.model.rsplit(":", 1)[0]
    read = [f for f in [model_file, *args.variants_file] if os.path.isfile(f)]
    for i, path in enumerate(args.export):
        check_export_path(path, databases=[args.db or default_db_path()], inputs=read, others=args.export[:i])


def _variants(args: argparse.Namespace) -> tuple[list[Variant], str]:
    """The iree_boo columns (the baseline first, in the kernels --kernels asks for) and those kernels' name."""
    from ..variants import build_variants

    variants = build_variants(args.variant, args.variants_file)
    from ..nn.kernels import kernels_variant

    # the iree_boo column (the baseline the variants are compared with): the kernels asked for, best by default
    kernels = kernels_variant(args.kernels)
    variants[0] = dataclasses.replace(kernels, name=variants[0].name)
    return variants, kernels.name


def _say(msg: str) -> None:
    """A progress line on stderr (none for an empty message)."""
    if msg:
        print(f"{PROG}: {msg}", file=sys.stderr, flush=True)


def _store_run(args: argparse.Namespace, job: ModelJob, variants: list[Variant], results: list[JobResult],
               env: dict[str, object], command_line: str, interrupted: bool) -> int:
    """Store the run in the results DB (the model, its variants, every column's result): its id."""
    from ..results import DONE, FAILED
    from ..store import Store, default_db_path

    store = Store(args.db or default_db_path())
    try:
        run_id = store.start_run(command_line=command_line, target="cpu",
                                 config={"model": job.command, "iter": args.iter, "rounds": args.rounds,
                                         "threads": args.threads, "variants": [v.name for v in variants]},
                                 environment=env)
        store.register_command(job.command, op="model", func_name=job.func_name)
        for v in variants:
            store.register_variant(run_id, v.name, flags=list(v.flags))
        for r in results:
            store.record_result(run_id, r)
        failed = any(r.status == FAILED for r in results)
        store.finish_run(run_id, "interrupted" if interrupted else "failed" if failed else DONE)
    finally:
        store.close()
    return run_id


def _print_kernels(results: list[JobResult], kernels: str) -> None:
    """After the table: what iree_boo's kernels were, then where each compiled column's time goes."""
    from ..modelbench import breakdown_lines

    sys.stdout.write(f"\niree_boo's kernels: {KERNEL_NOTES[kernels]}\n")
    for r in results:
        if r.breakdown:
            sys.stdout.write(f"\n### where the time goes: iree_boo {r.variant}\n\n```\n"
                             + "\n".join(breakdown_lines(r.breakdown)) + "\n```\n")


def _exit_code(args: argparse.Namespace, results: list[JobResult], comparisons: Comparisons, interrupted: bool,
               run_id: int | None) -> int:
    """130 when interrupted (said on stderr), 3 on a regression past --fail-on-regression, 1 when a column failed."""
    from ..comparisons import regressions
    from ..results import FAILED

    if interrupted:
        print(f"{PROG}: interrupted: the rounds taken were stored (run {run_id})", file=sys.stderr)
        return 130
    variant_cmps = {k: c for k, c in comparisons.items() if k[2] != "torch"}   # eager is not a variant
    if args.fail_on_regression is not None and regressions(variant_cmps, args.fail_on_regression):
        return EXIT_REGRESSION
    return EXIT_FAILED if any(r.status == FAILED for r in results) else EXIT_OK
