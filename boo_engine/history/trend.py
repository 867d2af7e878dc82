"""One kernel over time: its median (with a 95% CI) in every stored run that measured it, oldest first, each run
marked where its compiler version or its flags (--flags, or the variant's own) changed from the run before.

Read from any results database, merged ones included (`boo-tui merge`): the points may come from several
machines, each says which (host, CPU/GPU). The dashboard's trend view only draws what `kernel_trend` returns.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..compare import bootstrap_medians
from ..disturbance import effective_samples, round_medians
from ..store.readonly import open_readonly

if TYPE_CHECKING:
    from ..store import Store

#: bootstrap resamples for a run's median CI (1000: the CI's ends move < 1% between seeds on 20+ samples)
N_BOOT = 1000

_SELECT = """
SELECT r.id AS result_id, r.run_id, r.median_us, r.n, r.noisy, r.rounds, ru.started_at, ru.config, e.host, e.cpu, e.gpu,
       e.iree_compile_version AS env_compiler, k.compiler_version, v.flags AS variant_flags, v.content_hash
FROM results r
JOIN runs ru ON ru.id = r.run_id
JOIN commands c ON c.id = r.command_id
JOIN variants v ON v.id = r.variant_id
LEFT JOIN environments e ON e.id = ru.environment_id
LEFT JOIN kernels k ON k.id = r.kernel_id
WHERE c.text = ? AND v.name = ? AND r.backend = ? AND r.target = ? AND r.status = 'done'
ORDER BY ru.started_at, r.run_id
"""


@dataclass(frozen=True)
class TrendPoint:
    """The kernel in one run."""

    run_id: int
    started_at: str               # ISO-8601 UTC, as the run row has it
    host: str | None
    device: str | None            # the GPU's name, else the CPU's model
    compiler: str | None          # iree-compile's version line
    flags: tuple[str, ...]        # the run's --flags, then the variant's own flags
    median_us: float
    ci_low_us: float              # 95% interval of where a run lands (_ci; NaN with fewer than 2 samples)
    ci_high_us: float
    n: int
    noisy: bool
    compiler_changed: bool        # differs from the previous point's (False for the first)
    flags_changed: bool


def _ci(samples: list[float], rounds: list[int] | None = None, seed: int = 0) -> tuple[float, float]:
    """Where this run's median could as well have landed: over the run's rounds (each a placement and a moment of
    the machine) a 95% t interval for ANOTHER run's round mean, exp(mean log +- t sd sqrt(1 + 1/n)); a run is one
    draw (compare.py). A result without several rounds (or of fewer than 5 samples): the bootstrap CI of its
    samples' median, which only says how well this one draw was measured."""
    if len(samples) < 2:
        return math.nan, math.nan
    if len(samples) >= 5:
        from scipy.stats import t as student_t

        logs = np.log(np.asarray(round_medians(samples, rounds), dtype=np.float64))
        if logs.size >= 2 and np.all(np.isfinite(logs)):
            half = float(student_t.ppf(0.975, logs.size - 1)) * float(logs.std(ddof=1)) * math.sqrt(1 + 1 / logs.size)
            m = float(logs.mean())
            return math.exp(m - half), math.exp(m + half)
    meds = bootstrap_medians(np.asarray(samples, dtype=np.float64), N_BOOT, np.random.default_rng(seed))
    lo, hi = np.percentile(meds, [2.5, 97.5])
    return float(lo), float(hi)


def _db_path(db: Store | str | os.PathLike[str]) -> Path:
    """The database file: a path as given, a Store's own."""
    return Path(db) if isinstance(db, (str, os.PathLike)) else db.path


def kernel_trend(db: Store | str | os.PathLike[str], command: str, variant: str, backend: str,
                 target: str) -> list[TrendPoint]:
    """The kernel (command, variant, backend, target) in every run of the database `db` (a Store, or a path)
    that finished it, oldest first. A run that measured it twice (a resumed run) gives one point per result."""
    path = _db_path(db)
    with open_readonly(path) as conn:
        rows = [dict(r) for r in conn.execute(_SELECT, (command, variant, backend, target))]
        samples: dict[int, list[float]] = {r["result_id"]: [] for r in rows}
        for rid in samples:   # counted at the time the kernel ran (boo_engine/disturbance.py)
            got = conn.execute("SELECT latency_us, cpu_us FROM samples WHERE result_id = ? ORDER BY idx",
                               (rid,)).fetchall()
            cpu = [c for _, c in got if c is not None]
            samples[rid] = effective_samples([w for w, _ in got], cpu if len(cpu) == len(got) else [])
    points: list[TrendPoint] = []
    for row in rows:
        config = json.loads(row["config"]) if row["config"] else {}
        flags = tuple(str(f) for f in (config.get("compile_flags") or [])) + tuple(
            str(f) for f in (json.loads(row["variant_flags"]) if row["variant_flags"] else []))
        compiler = row["compiler_version"] or row["env_compiler"]
        s = samples[row["result_id"]]
        median = float(np.median(s)) if s else float(row["median_us"] if row["median_us"] is not None else math.nan)
        lo, hi = _ci(s, json.loads(row["rounds"]) if row["rounds"] else None)
        prev = points[-1] if points else None
        points.append(TrendPoint(
            run_id=int(row["run_id"]), started_at=str(row["started_at"]), host=row["host"],
            device=row["gpu"] or row["cpu"], compiler=compiler, flags=flags, median_us=median, ci_low_us=lo,
            ci_high_us=hi, n=len(s) or int(row["n"] or 0), noisy=bool(row["noisy"]),
            compiler_changed=prev is not None and prev.compiler != compiler,
            flags_changed=prev is not None and prev.flags != flags))
    return points


def run_kernels(db: Store | str | os.PathLike[str], run_id: int) -> list[tuple[str, str, str, str]]:
    """The (command, variant, backend, target) keys a run finished: what a trend can be asked for."""
    path = _db_path(db)
    with open_readonly(path) as conn:
        rows = conn.execute(
            "SELECT DISTINCT c.text, v.name, r.backend, r.target FROM results r JOIN commands c ON c.id = r.command_id"
            " JOIN variants v ON v.id = r.variant_id WHERE r.run_id = ? AND r.status = 'done' ORDER BY r.id",
            (run_id,)).fetchall()
    return [(r[0], r[1], r[2], r[3]) for r in rows]
