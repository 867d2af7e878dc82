"""Arguments shared by `boo-tui` (dashboard and headless) and turned into a SessionConfig in one place."""
from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import locations
from ..bench.devices import parse_devices
from ..errors import BooError, VariantError
from ..results import IREE, TORCH, CacheMode, Status

if TYPE_CHECKING:
    from ..variants import Variant

DEVICES_HELP = ("GPUs to measure on, one benchmark worker each: ids 0,1, a range 0-3, or all (default: the first "
                "GPU; the cpu target has one device, cpu). Commands are spread over them, a free device taking the "
                "next command; all jobs of one command (its variants and torch) run on ONE device, so each ratio vs "
                "the baseline is measured on the same device. Results record the device (cpu, cuda:0, hip:1)")


RAY_HELP = ("compile and measure on the Ray cluster at ADDRESS (HOST:PORT of its head, auto, ray://HOST:PORT of "
            "its client server, or local: a cluster of this machine started for the run, on loopback; default "
            "$BOO_RAY_ADDRESS): compiles run as Ray tasks on any node's CPUs, measurements on one actor per node "
            "(cpu target) or per GPU; results record the node. Needs the optional extra: pip install -e '.[ray]'")


def ray_address_arg(given: str | None, devices: object = None) -> str | None:
    """--ray / $BOO_RAY_ADDRESS, checked: ray installed (else the one line saying how), no --devices beside it."""
    from ..cluster import ray_address, require_ray

    address = ray_address(given)
    if address is None:
        return None
    require_ray(address)
    if devices:
        raise UsageError("--devices does not go with --ray: the cluster measures on every node's CPU or GPU")
    return address


class RaisingParser(argparse.ArgumentParser):
    """argparse that raises UsageError (one line) instead of printing the usage and exiting: the subcommands'
    parsers (capture, peak), whose errors go through `guarded`."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


class UsageError(BooError):
    """Bad command-line usage: printed as one line, exit code 2."""


def add_session_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="*", metavar="FILE_OR_COMMAND",
                   help="commands files (.txt shell-split, .tsv tab-split) and/or quoted commands, "
                        "e.g. 'conv -n 2 -c 8 -H 16 -W 16 -k 8 -y 3 -x 3'")
    g = p.add_argument_group("what to measure")
    g.add_argument("--target", default=None,
                   help="cpu (this host, the default without a GPU), hip:gfx942, cuda:sm_80, ...")
    g.add_argument("--variant", action="append", default=[], metavar="NAME=SPEC",
                   help="a variant: NAME=spec.mlir (tuning spec), NAME='--flag ...' (compiler flags), "
                        "NAME=DIR/ (edited dispatches from --dump-dispatches), NAME=formulation=F (the kernel "
                        "written as F: fwdconv, matmul), NAME=cache=cold (the baseline's kernel measured with "
                        "flushed caches: cold vs warm compared); repeatable")
    g.add_argument("--variants-file", action="append", default=[], metavar="TOML",
                   help="variants defined in a TOML file; repeatable")
    g.add_argument("--no-baseline", action="store_true",
                   help="do not measure the baseline (`boo`: the kernel as iree-turbine's BOO builds it)")
    g.add_argument("--no-best", action="store_true",
                   help="do not measure the `best` column (each kernel in the best known configuration for this "
                        "machine: one more IREE job per command)")
    g.add_argument("--backend", action="append", choices=[IREE, TORCH],
                   help="iree and/or torch (eager PyTorch on the same device); default: both")
    g.add_argument("--devices", default=None, metavar="LIST", help=DEVICES_HELP)
    g.add_argument("--flags", action="append", default=[], metavar="'--flag=v ...'",
                   help="iree-compile flags added to every IREE job of the run, the baseline included (after "
                        "each variant's own flags); recorded with the run and part of each kernel's cache key")
    t = p.add_argument_group("how to measure")
    t.add_argument("--iter", type=int, default=None, help="samples per job (overrides each command's --iter)")
    t.add_argument("--min-time", type=float, default=None, metavar="S", help="measure each job at least S seconds")
    t.add_argument("--max-time", type=float, default=60.0, metavar="S", help="at most S seconds per job (default 60)")
    t.add_argument("--threads", type=int, default=1,
                   help="CPU threads for kernels and torch (default 1: local-sync, the most stable)")
    t.add_argument("--seed", type=int, default=0, help="seed of the sample inputs (default 0)")
    t.add_argument("--splat-input-value", type=float, default=None, metavar="V", help="every input element = V")
    t.add_argument("--no-numerics", action="store_true", help="skip the numerics check")
    t.add_argument("--cache-mode", choices=["warm", "cold"], default="warm",
                   help="warm (default): inputs stay in cache between calls; cold: flush the caches before "
                        "every timed call (CPU: a buffer 2x the LLC; GPU: 2x L2), the flush outside the timing")
    t.add_argument("--rounds", type=int, default=5,
                   help="interleaving rounds when a command has several variants/backends (default 5)")
    t.add_argument("--min-effect", type=float, default=3.0, metavar="PCT",
                   help="smallest difference called faster/slower, in percent (default 3)")
    s = p.add_argument_group("where things go")
    s.add_argument("--db", default=None, help=locations.DB_HELP)
    s.add_argument("--cache-dir", default=None,
                   help=locations.CACHE_HELP)
    s.add_argument("--resume", nargs="?", const="last", default=None, metavar="RUN_ID",
                   help="continue a run (default: the last one) without redoing its finished jobs")
    s.add_argument("--jobs", type=int, default=None, help="parallel compiles (default: one per core)")
    s.add_argument("--ray", default=None, metavar="ADDRESS", help=RAY_HELP)
    s.add_argument("--compile-timeout", type=float, default=600.0, metavar="S", help="per compile (default 600)")


#: more kernel threads than this is a typo, not a measurement (100000 crashed the worker: "can't start new thread")
MAX_THREADS = 1024


def check_numbers(args: argparse.Namespace) -> None:
    """The numeric options a run takes, each in its range, before anything runs: one line naming the option (they
    used to be taken as given: --rounds 0, --jobs 0, --min-effect -5 or --seed -1 ran and stored a run)."""
    def bad(option: str, value: object, want: str) -> UsageError:
        return UsageError(f"{option} {value}: {want}")

    if args.threads > MAX_THREADS:
        raise bad("--threads", args.threads, f"give at most {MAX_THREADS} (this machine has {os.cpu_count()} cores)")
    if args.rounds < 1:
        raise bad("--rounds", args.rounds, "give at least 1 (5 by default; 2 or more for a confidence interval)")
    if args.jobs is not None and args.jobs < 1:
        raise bad("--jobs", args.jobs, "give at least 1 parallel compile")
    if not 0 <= args.min_effect < 100:
        raise bad("--min-effect", f"{args.min_effect:g}", "give a percentage in [0, 100)")
    if args.min_time is not None and not args.min_time >= 0:
        raise bad("--min-time", f"{args.min_time:g}", "give seconds >= 0")
    if not args.max_time > 0:
        raise bad("--max-time", f"{args.max_time:g}", "give seconds > 0")
    if not args.compile_timeout > 0:
        raise bad("--compile-timeout", f"{args.compile_timeout:g}", "give seconds > 0")
    if args.seed < 0:
        raise bad("--seed", args.seed, "give a seed >= 0")
    fail = getattr(args, "fail_on_regression", None)
    if fail is not None and not fail >= 0:
        raise bad("--fail-on-regression", f"{fail:g}", "give a percentage >= 0")


def env_variant(variants: Sequence[Variant]) -> list[Variant]:
    """BOO_TUNING_SPEC_PATH's spec as one more variant named after its file (as the README promises; the nn path
    and boo-driver honour it too; the caller says so on stderr, so a variable left set is seen); [] when unset or
    when a --variant already measures that spec. A missing file, a directory: one line (VariantError)."""
    from ..locations import TUNING_SPEC_ENV
    from ..variants import variant_from_env

    v = variant_from_env()
    if v is None or any(tuple(x.tuning_specs) == v.tuning_specs for x in variants):
        return []
    if any(x.name == v.name for x in variants):
        raise VariantError(f"{TUNING_SPEC_ENV}: its variant name {v.name!r} is taken by another variant: rename "
                           "one of them")
    return [v]


def program_name() -> str:
    """How the run was started, for its stored command line: `boo-tui`, also for `python -m boo_tui` (which had
    stored `__main__.py`)."""
    name = os.path.basename(sys.argv[0])
    return "boo-tui" if name in ("__main__.py", "-c", "") else name


def check_measurable(target, compile_only: str) -> None:
    """UsageError, one line, when this machine has no device for `target` (a GPU target here, without that GPU):
    its jobs failed one by one with torch's "Torch not compiled with CUDA enabled". `compile_only`: the option
    that compiles without measuring."""
    from ..targets import detect_gpu_archs

    if target.can_run():
        return
    found = ", ".join(detect_gpu_archs(target.kind)) or "none"
    raise UsageError(f"--target {target.name}: this machine has no {target.kind.upper()} GPU to measure it on "
                     f"({target.kind} GPUs here: {found}); add {compile_only} to compile the kernels into the cache "
                     f"without measuring (copy the cache to a machine that has one)")


def config_from_args(args: argparse.Namespace):
    """SessionConfig from parsed arguments; raises a BooError subclass with a one-line message."""
    from ..config import SessionConfig
    from ..targets import BOO_BUILD

    _check_counts(args)
    target = _target_arg(args)
    variants = _run_variants(args, target)
    run_flags = parse_run_flags(getattr(args, "flags", None) or [], target)
    devices = parse_devices(args.devices, target.kind) if getattr(args, "devices", None) is not None else ()
    if not (getattr(args, "compile_only", False) or getattr(args, "ray", None)):
        check_measurable(target, "--compile-only")
    backends = tuple(dict.fromkeys(args.backend or [IREE, TORCH]))
    check_cache_root(args.cache_dir)
    ray = ray_address_arg(getattr(args, "ray", None), devices)
    resume = _resume_arg(args.resume)
    return SessionConfig(
        target=target.name,
        variants=variants,
        backends=backends,
        iters=args.iter,
        min_time_s=args.min_time,
        max_time_s=args.max_time,
        threads=args.threads,
        seed=args.seed,
        splat_value=args.splat_input_value,
        verify_numerics=not args.no_numerics,
        cache_mode=CacheMode(args.cache_mode),
        db_path=args.db,
        cache_dir=args.cache_dir,
        compile_workers=args.jobs,
        compile_timeout_s=args.compile_timeout,
        rounds=args.rounds,
        min_effect=args.min_effect / 100.0,
        resume=resume,
        devices=devices,
        ray_address=ray,
        compile_flags=run_flags,
        build=BOO_BUILD,
        command_line=" ".join(shlex.quote(a) for a in [program_name()] + sys.argv[1:]),
    )


def _check_counts(args: argparse.Namespace) -> None:
    """--iter and --threads positive, then every other number in its range (check_numbers)."""
    if args.iter is not None and args.iter <= 0:
        raise UsageError(f"--iter must be positive, got {args.iter}")
    if args.threads <= 0:
        raise UsageError(f"--threads must be positive, got {args.threads}")
    check_numbers(args)


def _target_arg(args: argparse.Namespace):
    """The run's target (--target, else the default one), checked; its notice on stderr when it was given."""
    from ..targets import default_target, parse_target
    from ..variants import preflight_target

    # validate early: a TargetError names the problem; specs are checked against the target's kind
    target = parse_target(args.target) if args.target is not None else default_target()
    if target.notice and args.target is not None:   # (a detected GPU's notice comes from the session's log)
        print(f"note: {target.notice}", file=sys.stderr)
    preflight_target(target)
    return target


def _run_variants(args: argparse.Namespace, target) -> list[Variant]:
    """The run's variants (baseline, best, --variant, --variants-file, BOO_TUNING_SPEC_PATH's), each checked."""
    from ..variants import BEST, build_variants, preflight_variant
    from ..variants.parsing import check_names

    variants = build_variants(args.variant, args.variants_file, include_baseline=not args.no_baseline)
    if not getattr(args, "no_best", False):
        variants.insert(1 if not args.no_baseline else 0, BEST)
        check_names(variants)
    from_env = env_variant(variants)
    variants += from_env
    if not variants:
        raise UsageError("--no-baseline needs at least one --variant (or the best column)")
    for v in variants:
        preflight_variant(v, target)
    for v in from_env:
        print(f"note: {locations.TUNING_SPEC_ENV}={v.tuning_specs[0]}: measured as variant {v.name!r}",
              file=sys.stderr)
    return variants


def _resume_arg(resume: str | None) -> int | str | None:
    """--resume: a run id, "last" (the option alone), or None."""
    if resume is not None and resume != "last":
        try:
            return int(resume)
        except ValueError:
            raise UsageError(f"--resume expects a run id, got {resume!r}") from None
    return resume


def glue_flag_values(argv: Sequence[str], option: str = "--flags") -> list[str]:
    """`--flags --iree-foo=1` as `--flags=--iree-foo=1`: argparse takes a lone value starting with `-` for an
    option and refuses it; glued, it is the value that was meant."""
    out: list[str] = []
    it = iter(argv)
    for arg in it:
        if arg == option:
            value = next(it, None)
            out.append(arg if value is None else f"{option}={value}")
        else:
            out.append(arg)
    return out


def parse_run_flags(texts: Sequence[str], target) -> tuple[str, ...]:
    """`--flags '--iree-foo=1 --iree-bar'` (repeatable): the flags, shell-split and checked as a variant's are
    (each a `-` option this iree-compile knows, none the tool controls); a bad one is a UsageError (one line)."""
    from ..errors import VariantError
    from ..variants import Variant, preflight_variant

    flags: list[str] = []
    for text in texts:
        try:
            flags += shlex.split(text)
        except ValueError as e:
            raise UsageError(f"--flags {text[:80]!r}: {e}") from None
    if flags:
        try:
            preflight_variant(Variant(name="flags", flags=tuple(flags)), target)
        except VariantError as e:
            raise UsageError(f"--flags: {str(e).removeprefix('variant flags: ')}") from None
    return tuple(flags)


def check_cache_root(explicit: str | None) -> None:
    """A kernel cache root that cannot be created or read is a usage error (CacheRootError), and so is a key file
    that cannot be made or is not safe to use (CacheKeyError), answered before any work; a read-only root is fine
    (the session compiles into an overlay)."""
    from .. import locations
    from ..compile.cache import check_root
    from ..compile.trust import cache_key

    if explicit or locations.cache_enabled():
        check_root(locations.cache_root(explicit).resolve())
    cache_key()


def gpu_id_devices(text: str, target, *, runs: bool = True) -> tuple[tuple[str, ...], str | None]:
    """iree-boo-driver's `--gpu-id N`: measure on GPU N, i.e. `--devices N` (the benchmark worker's child sees only
    that GPU; bench/devices.py); -1 (iree-boo-driver's "every GPU") is `--devices all`. Raises UsageError (one
    line) where it cannot mean that: on the cpu target, for a GPU this machine does not have. `runs=False`
    (--preload: nothing is measured) gives a note that it has no effect instead. Returns (devices, note)."""
    try:
        gpu = int(text)
    except ValueError:
        raise UsageError(f"--gpu-id expects a GPU index or -1, got {text[:40]!r}") from None
    if gpu < -1:
        raise UsageError(f"--gpu-id expects a GPU index (0, 1, ...) or -1 (all), got {gpu}")
    if target.kind == "cpu":
        raise UsageError(f"--gpu-id {gpu}: the cpu target measures on this host's CPU, there is no GPU to pick "
                         "(give --target hip:ARCH or cuda:ARCH to measure on a GPU)")
    if not runs:
        return (), f"--gpu-id {gpu} has no effect with --preload (nothing is measured)"
    from ..bench.devices import DeviceError

    try:
        return parse_devices("all" if gpu == -1 else str(gpu), target.kind), None
    except DeviceError as e:
        raise UsageError(f"--gpu-id {gpu}: {e.detail}") from None


def job_succeeded(r) -> bool:
    """Measured AND correct: a kernel whose numerics check failed is a failed job for the exit code."""
    return r.status == Status.DONE and not (r.numerics is not None and r.numerics.failed)
