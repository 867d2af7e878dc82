"""What a session runs and how: plain data, importable without torch (the CLIs validate arguments into it
before the heavy imports start)."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from .compare import DEFAULT_MIN_EFFECT
from .results import IREE, TORCH, CacheMode, NumericsCriteria
from .variants import BASELINE, Variant


@dataclass
class RunSettings:
    """What a session and a tune are both given: where they run and store, and how verdicts are decided. The
    tuner's settings (tune.context.TuneSettings) extend it, and the tuner's session is made of it."""

    target: str | None = None                 # None: a detected GPU, else cpu
    threads: int = 1                          # CPU threads for the kernel (1: local-sync, the stable default)
    seed: int = 0
    db_path: str | None = None                # None: default_db_path()
    cache_dir: str | None = None              # None: $BOO_CACHE_DIR or the default cache
    compile_workers: int | None = None        # None: one per core
    min_effect: float = DEFAULT_MIN_EFFECT    # smallest time ratio change called faster / slower
    command_line: str = ""                    # recorded with the run
    ray_address: str | None = None            # --ray / $BOO_RAY_ADDRESS: compile and measure on this Ray cluster

    def run_settings(self) -> dict[str, Any]:
        """These settings alone, as keywords (a tune's session is made of them)."""
        return {f.name: getattr(self, f.name) for f in fields(RunSettings)}


@dataclass
class SessionConfig(RunSettings):
    variants: list[Variant] = field(default_factory=lambda: [BASELINE])
    backends: tuple[str, ...] = (IREE, TORCH)
    iters: int | None = None                  # None: each command's own --iter (default 100)
    min_time_s: float | None = None           # measure at least this long per job (overrides iters as the goal)
    max_time_s: float = 60.0                  # safety bound per job
    splat_value: float | None = None
    verify_numerics: bool = True
    numerics: NumericsCriteria = field(default_factory=NumericsCriteria)  # how numerics are judged (BOO's flags)
    compile_timeout_s: float = 600.0
    bench_timeout_s: float | None = None      # None: derived from max_time_s
    rounds: int = 5                           # interleaving rounds when a command has several jobs
    extra_args: tuple[str, ...] = ()          # appended to every command (a CLI --iter 5 overrides files)
    resume: int | str | None = None           # continue this run id (or "last") without redoing finished jobs
    per_op_defaults: bool = True              # cpu: this machine's per-op-class flags (False: IREE's plain defaults)
    build: str = "ours"                       # how the baseline (and every variant without a base) is built:
                                              # "ours" (our export, the per-op defaults: the engine's default, what
                                              # tune measures) or "boo" (iree-turbine's BOO: the front ends' runs)
    cache_mode: CacheMode = CacheMode.WARM    # COLD: flush the caches before every timed call (bench/flush.py)
    compile_flags: tuple[str, ...] = ()       # --flags: iree-compile flags added to EVERY IREE job of the run,
                                              # baseline included (after the variant's own); part of the cache key
    trials: bool = False                      # a tuner's run: a candidate variant that fails (compile, numerics)
                                              # is a pruned trial; only a baseline or a bad line fails the run
    devices: tuple[str, ...] = ()             # where to measure ("cpu", "cuda:0", ...; bench/devices.py): one
                                              # worker each, a command's jobs on one; (): the target's first
