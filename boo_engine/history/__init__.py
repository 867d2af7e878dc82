"""History across runs and machines: two stored runs compared (`runs.py`, `boo-tui compare`), one kernel over
every run that measured it (`trend.py`), and the comparison written as Markdown / CSV / JSON (`render.py`).
Everything reads stored samples; nothing compiles or measures. Databases are merged by `store/merge.py`
(`boo-tui merge`)."""
from __future__ import annotations

from .runs import (
    EnvDifference,
    HistoryError,
    RunComparison,
    RunRef,
    StoredRun,
    compare_refs,
    compare_stored,
    environment_diff,
    load_run,
    resolve_run,
)
from .trend import TrendPoint, kernel_trend, run_kernels

__all__ = ["EnvDifference", "HistoryError", "RunComparison", "RunRef", "StoredRun", "TrendPoint", "compare_refs",
           "compare_stored", "environment_diff", "kernel_trend", "load_run", "resolve_run", "run_kernels"]
