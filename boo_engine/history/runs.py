"""Two stored runs compared, from the same database or from two (other machines, other days): no kernel is
compiled or measured, and nothing here imports the compiler.

A side is named `RUN_ID` (in the default database), `PATH.db:RUN_ID`, or `PATH.db` (its last run). Results are
matched by (target, command, column), the column being the variant for IREE and "torch" for eager PyTorch (that
is, by command, variant, backend and target), and compared with `comparisons.compare_runs`: the variants' statistics
(median ratio B / A, bootstrap CI, Mann-Whitney p, the verdict incl. "unclear"). The verdicts use run B's
--min-effect and seed (or the caller's --min-effect). What differs between the two runs' machines and settings
(compiler, --flags, CPU/GPU, torch, host, ...) is listed first: a "regression" between two machines is often one.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..compare import DEFAULT_MIN_EFFECT, Comparison
from ..comparisons import VariantSummary, by_variant, compare_runs, summarize
from ..errors import BooError
from ..evidence import Evidence
from ..results import DONE, JobResult
from ..store import queries
from ..store.readonly import open_readonly


class HistoryError(BooError):
    """A run that does not exist, two runs with nothing in common: one line, a usage error."""


@dataclass(frozen=True)
class RunRef:
    """One side of a comparison: a run of a database file."""

    path: Path
    run_id: int
    #: how the file is named in labels: its name, or more of its path where the other side's file has the same
    #: name (`distinct_names`)
    shown: str = ""

    @property
    def label(self) -> str:
        return f"{self.shown or self.path.name}:{self.run_id}"


def distinct_names(a: RunRef, b: RunRef) -> tuple[RunRef, RunRef]:
    """`a` and `b` named by as much of their paths as tells them apart: two `r.db` in `laptop/` and `ci/` read
    `laptop/r.db:3` and `ci/r.db:3` (they read alike, `r.db:3` and `r.db:3`)."""
    pa, pb = a.path.resolve(), b.path.resolve()
    if pa == pb or pa.name != pb.name:
        return a, b
    for depth in range(2, max(len(pa.parts), len(pb.parts)) + 1):
        na, nb = Path(*pa.parts[-depth:]), Path(*pb.parts[-depth:])
        if na != nb:
            return replace(a, shown=str(na)), replace(b, shown=str(nb))
    return replace(a, shown=str(pa)), replace(b, shown=str(pb))


@dataclass(frozen=True)
class StoredRun:
    """A run read back: its row (config and environment dicts included) and every result with its samples."""

    ref: RunRef
    info: queries.RunInfo
    results: list[JobResult]

    @property
    def environment(self) -> dict[str, Any]:
        return self.info.get("environment") or {}

    @property
    def config(self) -> dict[str, Any]:
        return self.info.get("config") or {}


_RUN_ID = re.compile(r"^\d+$")


def resolve_run(spec: str, default_db: str | Path) -> RunRef:
    """`RUN_ID` (in `default_db`), `PATH:RUN_ID` or `PATH` (its last run) as a RunRef; HistoryError / SchemaError
    (one line) when the file is not a results database or the run is not in it."""
    spec = spec.strip()
    if _RUN_ID.match(spec):
        path, run = Path(default_db), int(spec)
    else:
        head, sep, tail = spec.rpartition(":")
        if sep and _RUN_ID.match(tail):
            path, run = Path(head), int(tail)
        else:
            path, run = Path(spec), -1
    with open_readonly(path) as conn:
        if run < 0:
            last = queries.last_run_id(conn)
            if last is None:
                raise HistoryError(f"{path} holds no run")
            run = int(last)
        elif conn.execute("SELECT 1 FROM runs WHERE id = ?", (run,)).fetchone() is None:
            raise HistoryError(f"no run {run} in {path}")
    return RunRef(path, run)


def load_run(ref: RunRef) -> StoredRun:
    with open_readonly(ref.path) as conn:
        info = queries.run_info(conn, ref.run_id)
        if info is None:
            raise HistoryError(f"no run {ref.run_id} in {ref.path}")
        return StoredRun(ref, info, queries.load_results(conn, ref.run_id))


# --- what differs between two runs -----------------------------------------------------------------------------

#: (label, where, key): what of a run's environment and settings makes its numbers differ
ENV_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("compiler", "env", "iree_compile_version"),
    ("runtime", "env", "iree_runtime_version"),
    ("flags", "config", "compile_flags"),
    ("cpu", "env", "cpu"),
    ("cpu (resolved)", "env", "cpu_name"),
    ("gpu", "env", "gpu"),
    ("gpu arch", "env", "gpu_arch"),
    ("driver", "env", "driver"),
    ("cores", "env", "cores_logical"),
    ("torch", "env", "torch_version"),
    ("host", "env", "host"),
    ("os", "env", "os"),
    ("boo-tui", "env", "tool_version"),
    ("per-op defaults", "env", "per_op_defaults"),
    ("target", "config", "target"),
    ("threads", "config", "threads"),
)


@dataclass(frozen=True)
class EnvDifference:
    what: str
    a: str
    b: str


def _show(value: object) -> str:
    """A value of a stored environment or config (any JSON) as the comparison shows it."""
    if value is None or value == [] or value == "":
        return "-"
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    if isinstance(value, dict):   # per-op defaults: where they came from is what matters
        return ", ".join(f"{k}={value[k]}" for k in sorted(value) if k != "path")
    return str(value)


def run_field(run: StoredRun, where: str, key: str) -> str:
    source = run.environment if where == "env" else run.config
    return _show(source.get(key))


def environment_diff(a: StoredRun, b: StoredRun) -> list[EnvDifference]:
    """What differs between the two runs' machines and settings, in ENV_FIELDS' order (most telling first)."""
    out = []
    for what, where, key in ENV_FIELDS:
        va, vb = run_field(a, where, key), run_field(b, where, key)
        if va != vb:
            out.append(EnvDifference(what, va, vb))
    return out


# --- the comparison ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunComparison:
    """Run B against run A: per common result the engine's comparison (ratio < 1: B faster), per column the
    geomean and verdict counts, and what differs between their environments."""

    a: StoredRun
    b: StoredRun
    comparisons: dict[tuple[str, str, str], Comparison]
    summaries: dict[str, VariantSummary]
    differences: list[EnvDifference]
    min_effect: float
    seed: int
    only_a: int = 0            # finished results of A with no match in B
    only_b: int = 0
    notes: list[str] = field(default_factory=list)
    #: per comparison, what each side (A, B) carries beside its numbers: rounds, disturbed samples, load, flags
    evidence: dict[tuple[str, str, str], tuple[Evidence, Evidence]] = field(default_factory=dict)


def run_settings(info: queries.RunInfo) -> tuple[float, int]:
    """(min_effect, seed) from a run's stored config (the defaults for runs that did not store them)."""
    config = info.get("config") or {}
    min_effect = config.get("min_effect") if isinstance(config, dict) else None
    seed = config.get("seed") if isinstance(config, dict) else None
    return (float(min_effect) if min_effect is not None else DEFAULT_MIN_EFFECT,
            int(seed) if seed is not None else 0)


#: below this many results a comparison is not worth a process pool (a comparison costs ~10 ms on 2 cores)
PARALLEL_MIN = 200
_FORKED: tuple[list[JobResult], float, int, float] | None = None   # what forked workers read (never pickled)


def _compare_chunk(after: list[JobResult]) -> dict[tuple[str, str, str], Comparison]:
    assert _FORKED is not None
    before, effect, seed, spread = _FORKED
    return compare_runs(before, after, min_effect=effect, seed=seed, run_spread=spread)


def _compare(a: list[JobResult], b: list[JobResult], effect: float, seed: int,
             workers: int) -> dict[tuple[str, str, str], Comparison]:
    """`compare_runs(a, b)`, split over `workers` forked processes when there is enough to compare: the same
    comparisons (each is seeded on its own), in B's order. 1,000 results of 100 samples: 12.8 s on one core of a
    2-core Zen 3 (bootstrap medians dominate), about half on both."""
    import multiprocessing

    from ..compare import run_to_run_spread
    from ..comparisons import matched

    global _FORKED
    spread = run_to_run_spread(matched(a, b).values())   # once, over every common result, for every chunk
    if workers < 2 or len(b) < PARALLEL_MIN or "fork" not in multiprocessing.get_all_start_methods():
        return compare_runs(a, b, min_effect=effect, seed=seed, run_spread=spread)
    from concurrent.futures import ProcessPoolExecutor

    _FORKED = (a, effect, seed, spread)
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            parts = list(pool.map(_compare_chunk, [b[i::workers] for i in range(workers)]))
    finally:
        _FORKED = None
    merged = {k: c for part in parts for k, c in part.items()}
    from ..comparisons import comparison_key

    order = [comparison_key(r) for r in b]
    return {k: merged[k] for k in dict.fromkeys(order) if k in merged}


def compare_stored(a: StoredRun, b: StoredRun, *, min_effect: float | None = None,
                   require_common: bool = True, workers: int = 1) -> RunComparison:
    """Compare run B against run A (see the module docstring). `min_effect` (a fraction; None: run B's).
    HistoryError when nothing finished is in common and `require_common`. `workers` > 1: split over forked
    processes (only from a process without other threads: the CLI, never the dashboard)."""
    b_effect, seed = run_settings(b.info)
    effect = b_effect if min_effect is None else min_effect
    comparisons = _compare(a.results, b.results, effect, seed, workers)
    if not comparisons and require_common:
        raise HistoryError(f"runs {a.ref.label} and {b.ref.label} have no finished result in common (same "
                           "command, variant, backend and target)")
    from ..comparisons import comparison_key

    keys_a = {comparison_key(r) for r in a.results if r.status == DONE and r.samples_us}
    keys_b = {comparison_key(r) for r in b.results if r.status == DONE and r.samples_us}
    notes = []
    a_effect, a_seed = run_settings(a.info)
    if min_effect is None and (a_effect, a_seed) != (b_effect, seed):
        notes.append(f"verdicts use run {b.ref.label}'s min effect {effect * 100:g}% and seed {seed} "
                     f"(run {a.ref.label} was measured with {a_effect * 100:g}% and seed {a_seed})")
    done_a = {comparison_key(r): r for r in a.results if r.status == DONE and r.samples_us}
    done_b = {comparison_key(r): r for r in b.results if r.status == DONE and r.samples_us}
    evidence = {k: (Evidence.of(done_a[k]), Evidence.of(done_b[k])) for k in comparisons
                if k in done_a and k in done_b}
    return RunComparison(a=a, b=b, comparisons=comparisons, summaries=summarize(by_variant(comparisons)),
                         differences=environment_diff(a, b), min_effect=effect, seed=seed,
                         only_a=len(keys_a - keys_b), only_b=len(keys_b - keys_a), notes=notes, evidence=evidence)


def compare_refs(a: RunRef, b: RunRef, *, min_effect: float | None = None, workers: int = 1) -> RunComparison:
    a, b = distinct_names(a, b)
    return compare_stored(load_run(a), load_run(b), min_effect=min_effect, workers=workers)


def regressed(result: RunComparison, pct: float) -> list[tuple[tuple[str, str, str], Comparison]]:
    """The results of B significantly slower than A's by more than `pct` percent (--fail-on-regression)."""
    from ..comparisons import regressions

    return [(k, c) for k, c in regressions(result.comparisons, pct)]


def describe_runs(runs: Sequence[StoredRun]) -> list[str]:
    """One line per run: where it ran and when (the header of a comparison)."""
    out = []
    for r in runs:
        env = r.environment
        machine = env.get("gpu") or env.get("cpu") or "-"
        out.append(f"{r.ref.label}: {str(r.info.get('started_at') or '-')[:19].replace('T', ' ')} on "
                   f"{env.get('host') or '-'} ({machine}), {r.info.get('target') or '-'}, {r.info.get('status')}")
    return out
