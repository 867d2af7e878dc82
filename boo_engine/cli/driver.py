"""`boo-driver`: a drop-in for iree-boo-driver's command line, on boo-tui's engine.

    boo-driver convbfp16 -n 128 -c 128 -H 24 -W 48 -k 384 -y 1 -x 1 ... -F 1 -t 1 --iter 100
    boo-driver --commands-file sample_commands.txt --csv results.csv --backend iree_boo --backend torch

The command's own tokens (MIOpen flags, -t/--time, --iter) are passed through untouched; the driver's flags are
picked out by name, so no MIOpen flag can be mistaken for a driver flag. Per command it prints the command and
`>>> min=..us max=..us mean=..us stddev=..us` per backend, as iree-boo-driver does (plus median and dispatches).
Exit code 1 when any command failed, 2 on usage errors. Every result also lands in the results DB (--db).
"""
from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import BooError
from ..results import IREE, CacheMode, JobResult
from .common import UsageError, check_measurable, gpu_id_devices, parse_run_flags, ray_address_arg
from .driver_output import BACKENDS, BEST_BACKEND, PROG, measure_and_print
from .exits import EXIT_FAILED, EXIT_OK, fail, guarded

if TYPE_CHECKING:  # pragma: no cover
    from ..config import SessionConfig
    from ..results import NumericsCriteria
    from ..targets import Target
    from ..variants import Variant

# flag -> number of values (0: a switch)
FLAGS = {
    "--commands-file": 1, "--csv": 1, "--backend": 1, "--verify-numerics": 0, "--cache-dir": 1,
    "--splat-input-value": 1, "--verbose": 0, "--no-verbose": 0, "--gpu-id": 1, "--devices": 1, "--target": 1,
    "--tuning-spec": 1, "--db": 1, "--preload": 0, "--jobs": 1, "--threads": 1, "--seed": 1,
    "--min-time": 1, "--max-time": 1, "--cache-mode": 1, "--flags": 1, "--ray": 1, "-h": 0, "--help": 0,
    # BOO's numerics flags (iree-turbine driver/driver.py)
    "--numerics-verbose": 0, "--numerics-min-samples": 1, "--numerics-stddev-rtol": 1, "--numerics-stddev-atol": 1,
    "--numerics-mean-rtol": 1, "--numerics-mean-atol": 1, "--numerics-reference-dtype": 1,
    "--skip-structured-tests": 0,
}
#: BOO's numerics tolerance flags -> NumericsCriteria fields
TOLERANCES = {"--numerics-stddev-rtol": "stddev_rtol", "--numerics-stddev-atol": "stddev_atol",
              "--numerics-mean-rtol": "mean_rtol", "--numerics-mean-atol": "mean_atol"}

USAGE = """usage: boo-driver [COMMAND ...] [--commands-file FILE] [--csv FILE] [--backend NAME]...
                  [--verify-numerics] [--cache-dir DIR] [--splat-input-value V] [--verbose | --no-verbose]
                  [--target cpu|hip:ARCH|cuda:ARCH] [--tuning-spec SPEC.mlir] [--db PATH] [--preload]
                  [--jobs N] [--threads N] [--seed N] [--min-time S] [--max-time S] [--gpu-id N|-1]
                  [--devices LIST]
                  [--cache-mode warm|cold] [--flags '--iree-flag=v ...'] [--ray ADDRESS]
                  [--numerics-verbose] [--numerics-min-samples N] [--numerics-{mean,stddev}-{atol,rtol} X]
                  [--numerics-reference-dtype float64|float32] [--skip-structured-tests]

A drop-in for iree-boo-driver: COMMAND is an MIOpenDriver command (conv*, layernorm*, gemm*), with its own
--iter (and -t/--time, accepted and ignored: every kernel is timed). Each line gives n=, the samples taken: a job
stops at --max-time S (default 60 s) even before --iter samples, and the line then says so.
Each command's lines are printed (and flushed) as soon as its jobs are done.
--backend: iree (also iree_boo, iree_boo_experimental, iree_boo_legacy: the kernel as iree-turbine's BOO builds
  it), best (each kernel in the best known configuration for this machine) and/or torch; default iree.
--preload compiles every command into the cache (in parallel) without running anything.
--gpu-id N measures on GPU N (-1: every GPU, as --devices all); refused on the cpu target and for a GPU this
machine lacks. --devices 0,1 | 0-3 | all: one benchmark worker per GPU, commands spread over them (a free GPU takes
the next command; all backends of one command run on ONE GPU, so they compare on the same device).
--flags '--iree-flag=v ...' adds iree-compile flags to every kernel (recorded with the run, part of the cache key).
--ray ADDRESS (or $BOO_RAY_ADDRESS) compiles and measures on that Ray cluster (one actor per node's CPU or per GPU;
results record the node; `--ray local` starts one on this machine's loopback); it needs the optional extra:
pip install -e '.[ray]'.
--cache-mode cold flushes the caches before every timed call (warm, the default, leaves inputs in cache).
On a GPU each line gives the wall time per call and, as `dispatch=`, the device time of the dispatches alone.
--verify-numerics checks every command's IREE kernel (BOO's criteria, changed by its --numerics-* flags) and adds
BOO's 11 CSV columns; a command's own -V 1 checks that command. MIOpenDriver's -w/-s/-S/-G are accepted, ignored.
Exit codes: 0 all commands succeeded, 1 some failed (CSV cells N.A.), 2 usage error."""


def _cache_mode(opts: dict[str, list[str]]) -> CacheMode:
    from ..bench.flush import check_cache_mode

    try:
        return check_cache_mode(_last(opts, "--cache-mode") or "warm")
    except ValueError as e:
        raise UsageError(str(e)) from None


def split_args(argv: Sequence[str]) -> tuple[dict[str, list[str]], list[str]]:
    """Driver options (name -> values, in order) and the remaining command tokens."""
    opts: dict[str, list[str]] = {}
    command: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        name, eq, inline = tok.partition("=")
        if name in FLAGS:
            if FLAGS[name] == 0:
                if eq:
                    raise BooError(f"{name} takes no value")
                opts.setdefault(name, []).append("")
            elif eq:
                opts.setdefault(name, []).append(inline)
            elif i + 1 < len(argv):
                opts.setdefault(name, []).append(argv[i + 1])
                i += 1
            else:
                raise BooError(f"{name} expects a value")
        else:
            command.append(tok)
        i += 1
    return opts, command


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        opts, command = split_args(argv)
    except BooError as e:
        return fail(PROG, str(e))
    if command and len(command[0].split()) > 1:
        # the command quoted as one argument (as boo-tui takes it): split it shell-style
        from ..commands.split import split_words
        from ..errors import elide

        try:
            command = split_words(command[0]) + command[1:]
        except ValueError as e:
            return fail(PROG, f"cannot split the command {elide(command[0])!r}: {e}")
    if "-h" in opts or "--help" in opts:
        print(USAGE)
        return EXIT_OK
    return guarded(PROG, lambda: _run(opts, command))


def _last(opts, name, default=None):
    return opts[name][-1] if name in opts else default


def _number(opts, name, kind, default=None):
    value = _last(opts, name)
    if value is None:
        return default
    try:
        return kind(value)
    except ValueError:
        raise BooError(f"{name} expects a number, got {value!r}") from None


def _positive(value: float, name: str) -> float:
    if not value > 0:
        raise BooError(f"{name} must be positive, got {value:g}")
    return value


def numerics_criteria(opts: dict[str, list[str]]):
    """BOO's numerics flags as a NumericsCriteria; a bad value is a BooError (one line, exit 2)."""
    import math

    from ..results import NumericsCriteria

    fields: dict[str, object] = {}
    for flag, name in TOLERANCES.items():
        value = _number(opts, flag, float)
        if value is not None:
            if not math.isfinite(value) or value < 0:
                raise BooError(f"{flag} expects a finite number >= 0, got {_last(opts, flag)!r}")
            fields[name] = value
    samples = _last(opts, "--numerics-min-samples")
    if samples is not None:
        if not samples.strip().isdigit() or int(samples) < 1:
            raise BooError(f"--numerics-min-samples expects a whole number >= 1, got {samples!r}")
        fields["min_samples"] = int(samples)
    ref = _last(opts, "--numerics-reference-dtype")
    if ref is not None:
        if ref not in ("float64", "float32"):
            raise BooError(f"--numerics-reference-dtype expects float64 or float32, got {ref!r}")
        fields["reference_dtype"] = ref
    if "--skip-structured-tests" in opts:
        fields["structured"] = False
    return NumericsCriteria(**fields)  # type: ignore[arg-type]


def _devices(opts: dict[str, list[str]], target) -> tuple[str, ...]:
    """Where to measure: `--gpu-id N` (a special case of --devices) or `--devices LIST`; () the default device."""
    from ..bench.devices import parse_devices

    runs = "--preload" not in opts
    if "--gpu-id" in opts and "--devices" in opts:
        raise BooError("give either --gpu-id or --devices, not both")
    devices: tuple[str, ...] = ()
    note = None
    if "--gpu-id" in opts:
        devices, note = gpu_id_devices(_last(opts, "--gpu-id"), target, runs=runs)
    elif "--devices" in opts:
        devices = parse_devices(_last(opts, "--devices") or "", target.kind)
        if not runs:
            note = "--devices has no effect with --preload (nothing is measured)"
    if note:
        print(f"{PROG}: note: {note}", file=sys.stderr)
    return devices


def _run(opts: dict[str, list[str]], command: list[str]) -> int:
    """The options checked in their order, then --preload or the measured run: the exit code."""
    names = _backend_names(opts)
    criteria = numerics_criteria(opts)
    if "--cache-dir" in opts:
        os.environ["BOO_CACHE_DIR"] = os.path.abspath(_last(opts, "--cache-dir"))
    files = opts.get("--commands-file", [])
    _check_sources(files, command)
    target, variant = _target_and_variant(opts)
    devices = _devices(opts, target)
    ray = ray_address_arg(_last(opts, "--ray"), devices) if "--preload" not in opts else None
    run_flags = parse_run_flags(opts.get("--flags", []), target)

    if "--preload" in opts:
        return _preload(opts, files, command, variant, target, run_flags)
    if ray is None:
        check_measurable(target, "--preload")
    config = _session_config(opts, names, criteria, target, variant, devices, ray, run_flags)
    csv_path = _csv_path(opts)
    return _run_session(opts, config, files, command, names, csv_path)


def _backend_names(opts: dict[str, list[str]]) -> list[str]:
    """The --backend names given (iree_boo when none), each one this driver knows."""
    names = opts.get("--backend") or ["iree_boo"]
    for name in names:
        if name not in BACKENDS:
            raise BooError(f"--backend {name!r} is not supported here (use iree, iree_boo, best or torch)")
    return names


def _check_sources(files: list[str], command: list[str]) -> None:
    """A command or --commands-file, not both (flags after --commands-file are added to each of its lines)."""
    if not files and not command:
        raise BooError("no command: give an MIOpenDriver command or --commands-file FILE")
    if files and command and not command[0].startswith("-"):
        raise BooError("give either a command or --commands-file, not both")


def _target_and_variant(opts: dict[str, list[str]]) -> tuple[Target, Variant]:
    """--target as BOO builds for it (its notice said) and the baseline variant, both preflighted."""
    from ..targets import BOO_BUILD, default_target, parse_target
    from ..variants import Variant, parse_variant_arg, preflight_target, preflight_variant, variant_from_env

    target_text = _last(opts, "--target")
    # iree_boo is BOO's own build (iree-turbine's export, BOO's flags), as iree-boo-driver runs it: measured and
    # preloaded alike
    target = dataclasses.replace(parse_target(target_text) if target_text else default_target(), build=BOO_BUILD)
    if target.notice:
        print(f"{PROG}: note: {target.notice}", file=sys.stderr)
    # The tuning spec replaces the baseline, as in iree-boo-driver (BOO_TUNING_SPEC_PATH is honoured too).
    variant = Variant()
    spec = _last(opts, "--tuning-spec")
    if spec is not None:
        variant = parse_variant_arg(f"{os.path.splitext(os.path.basename(spec))[0]}={spec}")
    else:
        variant = variant_from_env() or variant
    preflight_target(target)
    preflight_variant(variant, target)
    return target, variant


def _session_config(opts: dict[str, list[str]], names: list[str], criteria: NumericsCriteria, target: Target,
                    variant: Variant, devices: tuple[str, ...], ray: str | None,
                    run_flags: tuple[str, ...]) -> SessionConfig:
    """The session's settings: the backends and variants the --backend names ask for, the driver's flags."""
    from ..config import SessionConfig
    from ..targets import BOO_BUILD
    from ..variants import BEST

    return SessionConfig(
        target=target.name,
        build=BOO_BUILD,
        variants=[variant] * any(BACKENDS[n] == IREE and n != BEST_BACKEND for n in names)
        + [BEST] * (BEST_BACKEND in names),
        backends=tuple(dict.fromkeys(BACKENDS[n] for n in names)),
        threads=_number(opts, "--threads", int, 1),
        seed=_number(opts, "--seed", int, 0),
        min_time_s=_number(opts, "--min-time", float),
        max_time_s=_positive(_number(opts, "--max-time", float, 60.0), "--max-time"),
        splat_value=_number(opts, "--splat-input-value", float),
        verify_numerics="--verify-numerics" in opts,
        numerics=criteria,
        cache_mode=_cache_mode(opts),
        db_path=_last(opts, "--db"),
        cache_dir=_last(opts, "--cache-dir"),
        compile_workers=_number(opts, "--jobs", int),
        command_line=" ".join([PROG, *sys.argv[1:]]),
        devices=devices,
        ray_address=ray,
        compile_flags=run_flags,
    )


def _csv_path(opts: dict[str, list[str]]) -> str | None:
    """--csv's path (None without it), checked before anything is measured: no results database, no input."""
    csv_path = _last(opts, "--csv")
    if csv_path is not None:
        from .. import locations
        from ..exporters import check_export_path

        check_export_path(csv_path, formats=(".csv",), databases=[locations.db_path(_last(opts, "--db"))],
                          inputs=[f for f in (_last(opts, "--tuning-spec"),) if f and os.path.isfile(f)])
    return csv_path


def _run_session(opts: dict[str, list[str]], config: SessionConfig, files: list[str], command: list[str],
                 names: list[str], csv_path: str | None) -> int:
    """Measure and print every command under the stop signals, then write --csv: the exit code."""
    from ..session import Session
    from .signals import StopSignals

    verbose = "--verbose" in opts and "--no-verbose" not in opts
    rows: list[tuple[str, dict[str, JobResult]]] = []
    stops = StopSignals(PROG).install()   # a signal: the run ends interrupted (signals.py), no --csv written
    try:
        with Session(config) as session:
            stops.hard_exit = session.kill_children
            if session.cache_notice:
                print(f"{PROG}: {session.cache_notice}", file=sys.stderr)
            failed = measure_and_print(session, files, command, names, verbose, rows, stops,
                                       numerics_verbose="--numerics-verbose" in opts)
    except KeyboardInterrupt:   # before the run started
        return stops.exit_code
    finally:
        stops.restore()
    if stops.received:
        print(f"{PROG}: {stops.name}: run interrupted (--resume measures the rest)"
              + ("; --csv not written" if csv_path is not None else ""), file=sys.stderr)
        return stops.exit_code
    if csv_path is not None:
        from ..boo_driver_csv import write_boo_driver_csv

        write_boo_driver_csv(csv_path, rows, numerics="--verify-numerics" in opts)
    if session.failure is not None:  # the results database cannot be written: the run stopped; one line
        print(f"{PROG}: error: {session.failure}", file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK


def _preload(opts, files, command, variant, target, run_flags=()) -> int:
    from ..commands import parse_invocation, read_commands_file
    from ..compile.cache import KernelCache
    from ..compile.preload import format_summary, preload

    commands = []
    bad = []
    if files:
        for f in files:
            for line in read_commands_file(f, command, errors="collect"):
                if line.command is not None:
                    commands.append(line.command)
                else:
                    bad.append(line.message)
    else:
        commands.append(parse_invocation(command))
    cache = KernelCache(_last(opts, "--cache-dir"))  # a root that cannot be used: CacheRootError, exit 2
    if cache.notice:
        print(f"{PROG}: {cache.notice}", file=sys.stderr)
    summary = preload(commands, target, (variant,), workers=_number(opts, "--jobs", int), cache=cache,
                      extra_flags=run_flags)
    for message in bad:
        print(f"invalid {message}")
    print(format_summary(summary) + (f"; {len(bad)} invalid command line(s) not compiled" if bad else ""))
    return EXIT_FAILED if (bad or summary.failed) else EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
