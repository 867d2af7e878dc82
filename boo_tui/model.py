"""The dashboard's view of a run: one `JobView` per job, fed by session events, plus the pure functions that turn
it into table cells, filter it and sort it.

Kept free of Textual so it can be reasoned about (and tested) on its own; the widgets only render what this
module decides. Everything here runs on the UI thread.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Iterable

from rich.text import Text

from boo_engine import events as ev
from boo_engine.exporters import format_us
from boo_engine.results import (
    CANCELLED,
    DONE,
    FAILED,
    FINAL_STATUSES,
    INTERRUPTED,
    IREE,
    MEASURING,
    QUEUED,
    JobResult,
)

BASELINE = "baseline"

#: (column key, header label) of the results table, in display order.
#: The kernel name is long (it spells the shapes), so it goes last: on 80 columns the numbers stay in view.
#: "#" numbers the commands in the order they were added, so rows of one command can be told apart at a glance.
COLUMNS: list[tuple[str, str]] = [
    ("cmd", "#"),
    ("op", "op"),
    ("variant", "variant"),
    ("backend", "backend"),
    ("status", "status"),
    ("median", "median us"),
    ("gflops", "GFLOP/s"),
    ("speedup", "vs base"),
    ("numerics", "numerics"),
    ("noisy", "noisy"),
    ("kernel", "kernel"),
]
COLUMN_KEYS = [k for k, _ in COLUMNS]

STATUS_STYLE = {
    QUEUED: "dim",
    "exporting": "cyan",
    "compiling": "cyan",
    "cached": "blue",
    MEASURING: "bold yellow",
    DONE: "green",
    FAILED: "bold red",
    CANCELLED: "magenta",
    INTERRUPTED: "magenta",
}


@dataclass
class JobView:
    """What the dashboard knows about one job: the latest record plus the live state events carry."""

    result: JobResult
    status: str = QUEUED
    detail: str | None = None
    samples_us: list[float] = field(default_factory=list)
    target_count: int | None = None
    log: list[str] = field(default_factory=list)

    @property
    def job_id(self) -> str:
        return self.result.job_id

    @property
    def series_label(self) -> str:
        """How this job is named in plots beside its siblings of the same command."""
        return f"{self.result.variant}/{self.result.backend}"

    @property
    def median_us(self) -> float | None:
        st = self.result.stats
        if st is not None:
            return st.median_us
        return _median(self.samples_us) if self.samples_us else None


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else 0.5 * (s[mid - 1] + s[mid])


class RunModel:
    """All jobs of the session, in the order they were queued, updated from events."""

    def __init__(self) -> None:
        self.jobs: dict[str, JobView] = {}
        self.command_index: dict[str, int] = {}
        self._baselines: dict[tuple[str, str], JobView] = {}     # (target, command) -> its baseline IREE job
        self.run_id: int | None = None
        self.run_status: str = "idle"

    # ---- event intake ----------------------------------------------------------------------------------
    def upsert(self, result: JobResult) -> JobView:
        """Add a job or replace its record (a finished or re-queued result)."""
        view = self.jobs.get(result.job_id)
        self.command_index.setdefault(result.command, len(self.command_index) + 1)
        if view is None:
            view = JobView(result=result, status=result.status)
            self.jobs[result.job_id] = view
        else:
            view.result = result
            view.status = result.status
        if result.variant == BASELINE and result.backend == IREE:
            self._baselines[(result.target, result.command)] = view
        if result.samples_us:
            view.samples_us = list(result.samples_us)
        elif result.status == QUEUED:
            view.samples_us = []
            view.target_count = None
        return view

    def apply(self, event: ev.Event) -> set[str]:
        """Apply one event; returns the ids of the jobs it changed."""
        if isinstance(event, ev.RunStarted):
            self.run_id = event.run_id
            self.run_status = "running"
            return set()
        if isinstance(event, ev.RunFinished):
            self.run_id = event.run_id or self.run_id
            self.run_status = event.status
            return set()
        if isinstance(event, (ev.JobQueued, ev.JobFinished)):
            if event.result is None:
                return set()
            self.upsert(event.result)
            return {event.result.job_id}
        view = self.jobs.get(event.job_id or "")
        if view is None:
            return set()
        if isinstance(event, ev.JobStatus):
            view.status = event.status
            view.detail = event.detail
        elif isinstance(event, ev.CompileFinished):
            what = "cache hit" if event.cache_hit else f"compiled in {event.seconds:.1f}s"
            view.log.append(what if event.ok else f"compile failed: {event.error}")
        elif isinstance(event, ev.SamplesAdded):
            self.add_samples(view, event.samples_us, event.total, event.target_count)
        elif isinstance(event, ev.Log):
            view.log.append(f"{event.level}: {event.message}")
        return {view.job_id}

    @staticmethod
    def add_samples(view: JobView, batch: list[float], total: int, target: int | None) -> None:
        view.samples_us.extend(batch)
        view.target_count = target
        if total and len(view.samples_us) > total:   # a re-sent batch: keep the newest `total`
            del view.samples_us[: len(view.samples_us) - total]

    # ---- queries ---------------------------------------------------------------------------------------
    def siblings(self, job_id: str) -> list[JobView]:
        """Every job measuring the same command (all variants and backends), baseline first."""
        view = self.jobs.get(job_id)
        if view is None:
            return []
        same = [v for v in self.jobs.values() if v.result.command == view.result.command]
        return sorted(same, key=lambda v: (v.result.variant != BASELINE, v.result.variant, v.result.backend))

    def baseline_of(self, view: JobView) -> JobView | None:
        """The baseline IREE job of the same command and target (indexed: the table asks for every row)."""
        return self._baselines.get((view.result.target, view.result.command))

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for v in self.jobs.values():
            out[v.status] = out.get(v.status, 0) + 1
        return out

    def finished_ids(self) -> list[str]:
        return [j for j, v in self.jobs.items() if v.status in FINAL_STATUSES]


# ---- cells -----------------------------------------------------------------------------------------------
def status_text(view: JobView) -> Text:
    label = view.status
    if view.status == MEASURING:
        n = len(view.samples_us)
        label = f"measuring {n}/{view.target_count}" if view.target_count else f"measuring {n}"
    return Text(label, style=STATUS_STYLE.get(view.status, ""))


fmt_us = format_us  # one formatter for the table, the detail pane and the Markdown export


def speedup(model: RunModel, view: JobView) -> float | None:
    """Baseline IREE median / this job's median: > 1 means this job is faster than the baseline kernel."""
    base = model.baseline_of(view)
    if base is None or base is view:
        return None
    b, m = base.median_us, view.median_us
    if not b or not m or view.result.stats is None or base.result.stats is None:
        return None
    return b / m


def speedup_text(ratio: float | None, *, same_band: float = 0.03) -> Text:
    if ratio is None:
        return Text("-", style="dim")
    style = "dim" if abs(ratio - 1) <= same_band else ("green" if ratio > 1 else "red")
    return Text(f"{ratio:.2f}x", style=style)


def row_cells(model: RunModel, view: JobView) -> dict[str, Any]:
    r = view.result
    st = r.stats
    numerics = Text("-", style="dim")
    if r.numerics is not None:
        ok = r.numerics.verdict == "pass"
        numerics = Text(r.numerics.verdict, style="green" if ok else "bold red")
    return {
        "cmd": str(model.command_index.get(r.command, "")),
        "op": r.op,
        "kernel": r.func_name,
        "variant": r.variant,
        "backend": r.backend,
        "status": status_text(view),
        "median": Text(fmt_us(view.median_us), style="" if st else "dim"),
        "gflops": fmt_gflops(st.gflops if st else None),
        "speedup": speedup_text(speedup(model, view)),
        "numerics": numerics,
        "noisy": Text("noisy", style="yellow") if r.noisy else Text(""),
    }


def fmt_gflops(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.1f}" if x < 100 else f"{x:,.0f}"


# ---- filtering -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Filter:
    """`op:conv status:failed words...`: every given part must match (words match anywhere, case-insensitive)."""

    ops: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()
    words: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> "Filter":
        ops: list[str] = []
        statuses: list[str] = []
        words: list[str] = []
        try:
            tokens = shlex.split(text)
        except ValueError:       # an unclosed quote while the user is typing
            tokens = text.split()
        for tok in tokens:
            low = tok.lower()
            if low.startswith("op:") and len(low) > 3:
                ops.extend(low[3:].split(","))
            elif low.startswith("status:") and len(low) > 7:
                statuses.extend(low[7:].split(","))
            else:
                words.append(low)
        return cls(tuple(ops), tuple(statuses), tuple(words))

    @property
    def active(self) -> bool:
        return bool(self.ops or self.statuses or self.words)

    def matches(self, view: JobView) -> bool:
        r = view.result
        if self.ops and r.op.lower() not in self.ops:
            return False
        if self.statuses and not any(view.status.startswith(s) for s in self.statuses):
            return False
        if self.words:
            hay = " ".join(str(x) for x in (r.command, r.func_name, r.variant, r.backend, r.op, view.status,
                                           r.error or "", r.source or "")).lower()
            return all(w in hay for w in self.words)
        return True


# ---- sorting ---------------------------------------------------------------------------------------------
_STATUS_ORDER = {s: i for i, s in enumerate(
    [MEASURING, "compiling", "exporting", "cached", QUEUED, DONE, FAILED, CANCELLED, INTERRUPTED])}


def sort_key(model: RunModel, column: str) -> Callable[[JobView], Any]:
    """A key that sorts missing values last whatever the column."""

    def num(x: float | None) -> tuple[int, float]:
        return (1, 0.0) if x is None else (0, x)

    def key(v: JobView) -> Any:
        r = v.result
        if column == "cmd":
            return model.command_index.get(r.command, 0)
        if column == "status":
            return _STATUS_ORDER.get(v.status, 99)
        if column == "median":
            return num(v.median_us)
        if column == "gflops":
            return num(r.stats.gflops if r.stats else None)
        if column == "speedup":
            return num(speedup(model, v))
        if column == "numerics":
            return r.numerics.verdict if r.numerics else "~"
        if column == "noisy":
            return not r.noisy
        return str({"op": r.op, "kernel": r.func_name, "variant": r.variant, "backend": r.backend}.get(column, ""))

    return key


def ordered(model: RunModel, flt: Filter, sort_by: str | None, reverse: bool) -> list[JobView]:
    views: Iterable[JobView] = (v for v in model.jobs.values() if flt.matches(v))
    out = list(views)
    if sort_by:
        out.sort(key=sort_key(model, sort_by), reverse=reverse)
    return out


# ---- the signature, for the detail pane -----------------------------------------------------------------
@lru_cache(maxsize=512)
def describe_command(command: str) -> dict[str, Any] | str:
    """The parsed signature's facts, or the parse error's one-line message (the parser is cheap)."""
    try:
        from boo_engine.commands import parse_command

        return dict(parse_command(command).describe())
    except Exception as e:  # noqa: BLE001 - shown to the user, whatever the reason
        return f"{type(e).__name__}: {e}"
