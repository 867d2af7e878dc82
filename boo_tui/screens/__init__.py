"""Screens beside the live dashboard: run and tune history, one saved run, two saved runs side by side, the
variants of this session compared, a tune live (`tune`) and a stored tune reviewed (`tune_review`).

Every database read and every statistics computation (bootstrap CIs cost tens of milliseconds per command) runs
in a thread worker; results come back with `Deferred` messages, so the event loop keeps ticking. The verdicts are
the engine's (`comparisons.compare_results` / `comparisons.compare_runs` with the run's --min-effect and seed), as the
exports give them.
"""
from __future__ import annotations

from .history import HistoryScreen
from .roofline import RooflineScreen
from .run import RunScreen
from .run_compare import RunCompareScreen
from .tune_review import TuneReviewScreen
from .variants_compare import CompareScreen

__all__ = ["CompareScreen", "HistoryScreen", "RooflineScreen", "RunCompareScreen", "RunScreen", "TuneReviewScreen"]
