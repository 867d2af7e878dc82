"""What the front ends (the dashboard, boo_tui) take from the engine: one small module naming it all, so that an
import-linter contract (pyproject.toml) can say boo_tui imports nothing else of boo_engine. Each name is loaded
when first used (PEP 562), so the dashboard pays for the session or the tuner only when it starts one.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: name -> the engine module it lives in (a module's own name: that module)
_WHERE: dict[str, str] = {
    "add_headless_args": "boo_engine.cli.headless",
    "add_session_args": "boo_engine.cli.common",
    "Backend": "boo_engine.results",
    "BASELINE_LABEL": "boo_engine.compare",
    "BooError": "boo_engine.errors",
    "breakdown_lines": "boo_engine.modelbench.breakdown",
    "build_label": "boo_engine.columns",
    "by_variant": "boo_engine.comparisons",
    "check_export_path": "boo_engine.exporters",
    "check_named_kernels": "boo_engine.variants",
    "checked_stdout": "boo_engine.cli.output",
    "CHILD_LOG_ENV": "boo_engine.process_setup",
    "chosen_flags": "boo_engine.compile.flags",
    "column_label": "boo_engine.comparisons",
    "compare_results": "boo_engine.comparisons",
    "compare_stored": "boo_engine.history",
    "Comparison": "boo_engine.compare",
    "config_from_args": "boo_engine.cli.common",
    "DEFAULT_MIN_EFFECT": "boo_engine.compare",
    "defaults_label": "boo_engine.environment",
    "describe_model_line": "boo_engine.markdown",
    "DONE": "boo_engine.results",
    "events": "boo_engine.events",
    "fail": "boo_engine.cli.exits",
    "FINAL_STATUSES": "boo_engine.results",
    "find_tune": "boo_engine.tune.records",
    "format_us": "boo_engine.markdown",
    "FORMATS": "boo_engine.exporters",
    "geomean": "boo_engine.compare",
    "glue_flag_values": "boo_engine.cli.common",
    "IMPROVED": "boo_engine.tune.records",
    "internal_error": "boo_engine.cli.exits",
    "JobResult": "boo_engine.results",
    "KERNEL_FAILED": "boo_engine.tune.records",
    "kernel_trend": "boo_engine.history",
    "KernelTuned": "boo_engine.tune.events",
    "list_tunes": "boo_engine.tune.records",
    "load_kernels": "boo_engine.tune.records",
    "load_run": "boo_engine.history",
    "machine_label": "boo_engine.environment",
    "MEASURED": "boo_engine.tune.records",
    "ModelLine": "boo_engine.weights",
    "one_line": "boo_engine.errors",
    "parse_command": "boo_engine.commands",
    "parse_invocation": "boo_engine.commands",
    "Peaks": "boo_engine.limits",
    "preflight_variant": "boo_engine.variants",
    "roof_cell": "boo_engine.markdown",
    "run_headless": "boo_engine.cli.headless",
    "run_kernels": "boo_engine.history",
    "RunInfo": "boo_engine.store.queries",
    "RunRef": "boo_engine.history",
    "RunRow": "boo_engine.store.queries",
    "run_settings": "boo_engine.history.runs",
    "RunStatus": "boo_engine.results",
    "Session": "boo_engine.session",
    "SessionConfig": "boo_engine.session",
    "Status": "boo_engine.results",
    "STOP_SIGNALS": "boo_engine.process_setup",
    "StopSignals": "boo_engine.cli.signals",
    "Store": "boo_engine.store",
    "summarize": "boo_engine.comparisons",
    "TORCH": "boo_engine.results",
    "TrendPoint": "boo_engine.history",
    "Tried": "boo_engine.tune.records",
    "TunedKernel": "boo_engine.tune.records",
    "TuneEvent": "boo_engine.tune.events",
    "TuneLog": "boo_engine.tune.events",
    "Tuner": "boo_engine.tune.search",
    "TuneRow": "boo_engine.tune.records",
    "TuneSettings": "boo_engine.tune.search",
    "TuneSummary": "boo_engine.tune.records",
    "TuneUpdate": "boo_engine.tune.events",
    "variants": "boo_engine.variants",
    "VariantSummary": "boo_engine.comparisons",
    "Verdict": "boo_engine.compare",
    "verdict_legend": "boo_engine.markdown",
    "VERDICT_MARK": "boo_engine.markdown",
    "verdict_words": "boo_engine.markdown",
    "wants_headless": "boo_engine.cli.headless",
    "warm_imports": "boo_engine.session",
    "write_outputs": "boo_engine.tune.report",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(where)
    value = module if where == f"boo_engine.{name}" else getattr(module, name)
    globals()[name] = value   # (looked up once)
    return value


if TYPE_CHECKING:   # what each name is, for the type checker (`X as X`: re-exported)
    from boo_engine import (
        events as events,
    )
    from boo_engine import (
        variants as variants,
    )
    from boo_engine.cli.common import (
        add_session_args as add_session_args,
    )
    from boo_engine.cli.common import (
        config_from_args as config_from_args,
    )
    from boo_engine.cli.common import (
        glue_flag_values as glue_flag_values,
    )
    from boo_engine.cli.exits import (
        fail as fail,
    )
    from boo_engine.cli.exits import (
        internal_error as internal_error,
    )
    from boo_engine.cli.headless import (
        add_headless_args as add_headless_args,
    )
    from boo_engine.cli.headless import (
        run_headless as run_headless,
    )
    from boo_engine.cli.headless import (
        wants_headless as wants_headless,
    )
    from boo_engine.cli.output import (
        checked_stdout as checked_stdout,
    )
    from boo_engine.cli.signals import (
        StopSignals as StopSignals,
    )
    from boo_engine.columns import (
        build_label as build_label,
    )
    from boo_engine.commands import (
        parse_command as parse_command,
    )
    from boo_engine.commands import (
        parse_invocation as parse_invocation,
    )
    from boo_engine.compare import (
        BASELINE_LABEL as BASELINE_LABEL,
    )
    from boo_engine.compare import (
        DEFAULT_MIN_EFFECT as DEFAULT_MIN_EFFECT,
    )
    from boo_engine.compare import (
        Comparison as Comparison,
    )
    from boo_engine.compare import (
        Verdict as Verdict,
    )
    from boo_engine.compare import (
        geomean as geomean,
    )
    from boo_engine.comparisons import VariantSummary as VariantSummary
    from boo_engine.comparisons import by_variant as by_variant
    from boo_engine.comparisons import column_label as column_label
    from boo_engine.comparisons import compare_results as compare_results
    from boo_engine.comparisons import summarize as summarize
    from boo_engine.compile.flags import (
        chosen_flags as chosen_flags,
    )
    from boo_engine.environment import (
        defaults_label as defaults_label,
    )
    from boo_engine.environment import (
        machine_label as machine_label,
    )
    from boo_engine.errors import (
        BooError as BooError,
    )
    from boo_engine.errors import (
        one_line as one_line,
    )
    from boo_engine.exporters import (
        FORMATS as FORMATS,
    )
    from boo_engine.exporters import (
        check_export_path as check_export_path,
    )
    from boo_engine.history import (
        RunRef as RunRef,
    )
    from boo_engine.history import (
        TrendPoint as TrendPoint,
    )
    from boo_engine.history import (
        compare_stored as compare_stored,
    )
    from boo_engine.history import (
        kernel_trend as kernel_trend,
    )
    from boo_engine.history import (
        load_run as load_run,
    )
    from boo_engine.history import (
        run_kernels as run_kernels,
    )
    from boo_engine.history.runs import (
        run_settings as run_settings,
    )
    from boo_engine.limits import (
        Peaks as Peaks,
    )
    from boo_engine.markdown import (
        VERDICT_MARK as VERDICT_MARK,
    )
    from boo_engine.markdown import (
        describe_model_line as describe_model_line,
    )
    from boo_engine.markdown import (
        format_us as format_us,
    )
    from boo_engine.markdown import (
        roof_cell as roof_cell,
    )
    from boo_engine.markdown import (
        verdict_legend as verdict_legend,
    )
    from boo_engine.markdown import (
        verdict_words as verdict_words,
    )
    from boo_engine.modelbench.breakdown import (
        breakdown_lines as breakdown_lines,
    )
    from boo_engine.process_setup import (
        CHILD_LOG_ENV as CHILD_LOG_ENV,
    )
    from boo_engine.process_setup import (
        STOP_SIGNALS as STOP_SIGNALS,
    )
    from boo_engine.results import (
        DONE as DONE,
    )
    from boo_engine.results import (
        FINAL_STATUSES as FINAL_STATUSES,
    )
    from boo_engine.results import (
        TORCH as TORCH,
    )
    from boo_engine.results import (
        Backend as Backend,
    )
    from boo_engine.results import (
        JobResult as JobResult,
    )
    from boo_engine.results import (
        RunStatus as RunStatus,
    )
    from boo_engine.results import (
        Status as Status,
    )
    from boo_engine.session import (
        Session as Session,
    )
    from boo_engine.session import (
        SessionConfig as SessionConfig,
    )
    from boo_engine.session import (
        warm_imports as warm_imports,
    )
    from boo_engine.store import (
        Store as Store,
    )
    from boo_engine.store.queries import (
        RunInfo as RunInfo,
    )
    from boo_engine.store.queries import (
        RunRow as RunRow,
    )
    from boo_engine.tune.events import (
        KernelTuned as KernelTuned,
    )
    from boo_engine.tune.events import (
        TuneEvent as TuneEvent,
    )
    from boo_engine.tune.events import (
        TuneLog as TuneLog,
    )
    from boo_engine.tune.events import (
        TuneUpdate as TuneUpdate,
    )
    from boo_engine.tune.records import (
        IMPROVED as IMPROVED,
    )
    from boo_engine.tune.records import (
        KERNEL_FAILED as KERNEL_FAILED,
    )
    from boo_engine.tune.records import (
        MEASURED as MEASURED,
    )
    from boo_engine.tune.records import (
        Tried as Tried,
    )
    from boo_engine.tune.records import (
        TunedKernel as TunedKernel,
    )
    from boo_engine.tune.records import (
        TuneRow as TuneRow,
    )
    from boo_engine.tune.records import (
        TuneSummary as TuneSummary,
    )
    from boo_engine.tune.records import (
        find_tune as find_tune,
    )
    from boo_engine.tune.records import (
        list_tunes as list_tunes,
    )
    from boo_engine.tune.records import (
        load_kernels as load_kernels,
    )
    from boo_engine.tune.report import (
        write_outputs as write_outputs,
    )
    from boo_engine.tune.search import (
        Tuner as Tuner,
    )
    from boo_engine.tune.search import (
        TuneSettings as TuneSettings,
    )
    from boo_engine.variants import (
        check_named_kernels as check_named_kernels,
    )
    from boo_engine.variants import (
        preflight_variant as preflight_variant,
    )
    from boo_engine.weights import (
        ModelLine as ModelLine,
    )
