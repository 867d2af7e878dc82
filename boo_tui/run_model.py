"""The dashboard's view of a run: one `JobView` per job and the engine's verdicts, fed by session events.

Kept free of Textual so it can be reasoned about (and tested) on its own; `cells` turns it into table cells and the
widgets only render what these two modules decide. Everything here runs on the UI thread, and nothing here decides
whether a variant is faster: the "vs base" column shows the engine's `Comparison`s (its `ComparisonsUpdated`
events, or `Session.comparisons` on the engine thread), the ones the exports print.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from boo_engine.api import BASELINE_LABEL, FINAL_STATUSES, Comparison, JobResult, RunStatus, Status, column_label
from boo_engine.api import events as ev


@dataclass
class JobView:
    """What the dashboard knows about one job: the latest record plus the live state events carry."""

    result: JobResult
    status: str = Status.QUEUED
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
    def column(self) -> str:
        """The job's column in the exports' comparison tables: the variant's name, or "torch"."""
        return column_label(self.result)

    @property
    def key(self) -> tuple[str, str]:
        """(target, command): the jobs measured together and compared with one another."""
        return (self.result.target, self.result.command)

    @property
    def median_us(self) -> float | None:
        if self.result.median_us is not None:
            return self.result.median_us
        return _median(self.samples_us) if self.samples_us else None


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else 0.5 * (s[mid - 1] + s[mid])


class RunModel:
    """All jobs of the session, in the order they were queued, and the engine's verdicts, updated from events."""

    def __init__(self) -> None:
        self.jobs: dict[str, JobView] = {}
        self.command_index: dict[str, int] = {}
        self.run_id: int | None = None
        self.run_status: str = "idle"
        #: some command has a weight (its commands file had `# boo-tui:` lines): the table shows share and calls,
        #: sorts by share, and the engine's model line is shown
        self.weighted = False
        #: the devices results were measured on: the table shows a device column once there are several
        self.devices: set[str] = set()
        #: bumped whenever a job settles or restarts and whenever verdicts arrive: what the model line depends on
        self.version = 0
        #: (target, command) -> {column label: the engine's Comparison against the baseline}
        self.comparisons: dict[tuple[str, str], dict[str, Comparison]] = {}
        self._generation: dict[tuple[str, str], int] = {}   # bumped when a job of the command ends or restarts
        self._answered: dict[tuple[str, str], int] = {}     # the generation the verdicts are for (or asked for)
        self._also_changed: set[str] = set()                 # rows a restart changed beside the restarted job's

    # ---- event intake ----------------------------------------------------------------------------------
    def upsert(self, result: JobResult) -> JobView:
        """Add a job or replace its record (a finished or re-queued result)."""
        view = self.jobs.get(result.job_id)
        self.command_index.setdefault(result.command, len(self.command_index) + 1)
        if result.calls is not None:
            self.weighted = True
        if result.device:   # (with the node, --ray: two nodes' cpus are two devices)
            self.devices.add(result.where)
        if view is None:
            view = JobView(result=result, status=result.status)
            self.jobs[result.job_id] = view
        else:
            view.result = result
            view.status = result.status
        if result.samples_us:
            view.samples_us = list(result.samples_us)
        elif result.status == Status.QUEUED:
            view.samples_us = []
            view.target_count = None
        if result.status == Status.QUEUED:
            self._restarted(view)
        elif result.status in FINAL_STATUSES:
            self._bump(view.key)
        return view

    def apply(self, event: ev.Event) -> set[str]:
        """Apply one event; returns the ids of the jobs it changed."""
        if isinstance(event, ev.RunStarted):
            self.run_id = event.run_id
            self.run_status = RunStatus.RUNNING
            return set()
        if isinstance(event, ev.RunFinished):
            self.run_id = event.run_id or self.run_id
            self.run_status = event.status
            return set()
        if isinstance(event, ev.ComparisonsUpdated):
            key = (event.target, event.command)
            return self.set_comparisons(key, dict(event.comparisons), self._generation.get(key, 0))
        if isinstance(event, (ev.JobQueued, ev.JobFinished)):
            if event.result is None:
                return set()
            self.upsert(event.result)
            return {event.result.job_id} | self._take_also_changed()
        view = self.jobs.get(event.job_id or "")
        if view is None:
            return set()
        if isinstance(event, ev.JobStatus):
            view.status = event.status
            view.detail = event.detail
            if event.status == Status.QUEUED:
                view.samples_us = []
                view.target_count = None
                self._restarted(view)
        elif isinstance(event, ev.CompileFinished):
            what = "cache hit" if event.cache_hit else f"compiled in {event.seconds:.1f}s"
            view.log.append(what if event.ok else f"compile failed: {event.error}")
        elif isinstance(event, ev.SamplesAdded):
            self.add_samples(view, event.samples_us, event.total, event.target_count)
        elif isinstance(event, ev.Log):
            view.log.append(f"{event.level}: {event.message}")
        return {view.job_id} | self._take_also_changed()

    @staticmethod
    def add_samples(view: JobView, batch: list[float], total: int, target: int | None) -> None:
        view.samples_us.extend(batch)
        view.target_count = target
        if total and len(view.samples_us) > total:   # a re-sent batch: keep the newest `total`
            del view.samples_us[: len(view.samples_us) - total]

    # ---- the engine's verdicts ---------------------------------------------------------------------------
    def _bump(self, key: tuple[str, str]) -> None:
        self._generation[key] = self._generation.get(key, 0) + 1
        self.version += 1

    def _restarted(self, view: JobView) -> None:
        """A job measures again: its verdict (every verdict of the command, for the baseline) is stale."""
        verdicts = self.comparisons.get(view.key)
        if verdicts and view.column == BASELINE_LABEL:
            verdicts.clear()
            self._also_changed |= {v.job_id for v in self.jobs.values() if v.key == view.key}
        elif verdicts:
            verdicts.pop(view.column, None)
        self._bump(view.key)

    def _take_also_changed(self) -> set[str]:
        out, self._also_changed = self._also_changed, set()
        return out

    def set_comparisons(self, key: tuple[str, str], by_column: dict[str, Comparison], generation: int) -> set[str]:
        """The engine's verdicts for one (target, command), computed when its jobs were as in `generation`
        (ignored when a job of the command ended or restarted since). Returns the ids of the jobs they change."""
        if generation != self._generation.get(key, 0):
            return set()
        self.comparisons[key] = by_column
        self._answered[key] = generation
        self.version += 1
        return {v.job_id for v in self.jobs.values() if v.key == key}

    def all_comparisons(self) -> dict[tuple[str, str, str], Comparison]:
        """Every verdict the engine sent, keyed as `comparisons.compare_results` keys them."""
        return {(t, c, label): comp for (t, c), by in self.comparisons.items() for label, comp in by.items()}

    def comparison_of(self, view: JobView) -> Comparison | None:
        """The engine's verdict on this job against its command's baseline (None for the baseline itself, for a
        job not finished, and while the engine has not decided)."""
        if view.status != Status.DONE or view.column == BASELINE_LABEL:
            return None
        return self.comparisons.get(view.key, {}).get(view.column)

    def unanswered(self) -> dict[tuple[str, str], tuple[int, list[JobResult]]]:
        """Commands whose verdicts the engine has not sent for their present state (it sends them once a batch
        measured several of a command's jobs together: a job re-run on its own, a variant added after its
        baseline ran or a resumed run get none): {(target, command): (generation, its results)}, for
        `Session.comparisons`. Only commands that are settled and have something to compare are listed; each
        is listed once per state (it is marked as asked)."""
        jobs: dict[tuple[str, str], list[JobView]] = {}
        for v in self.jobs.values():
            jobs.setdefault(v.key, []).append(v)
        out: dict[tuple[str, str], tuple[int, list[JobResult]]] = {}
        for key, views in jobs.items():
            generation = self._generation.get(key, 0)
            if self._answered.get(key) == generation or any(v.status not in FINAL_STATUSES for v in views):
                continue
            done = [v for v in views if v.status == Status.DONE and v.result.samples_us]
            if not any(v.column == BASELINE_LABEL for v in done) or len(done) < 2:
                continue
            self._answered[key] = generation
            out[key] = (generation, [v.result for v in views])
        return out

    # ---- queries ---------------------------------------------------------------------------------------
    def siblings(self, job_id: str) -> list[JobView]:
        """Every job measuring the same command (all variants and backends), baseline first."""
        view = self.jobs.get(job_id)
        if view is None:
            return []
        same = [v for v in self.jobs.values() if v.result.command == view.result.command]
        return sorted(same, key=lambda v: (v.result.variant != BASELINE_LABEL, v.result.variant, v.result.backend))

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for v in self.jobs.values():
            out[v.status] = out.get(v.status, 0) + 1
        return out

    def finished_ids(self) -> list[str]:
        return [j for j, v in self.jobs.items() if v.status in FINAL_STATUSES]


# ---- the signature, for the shape column and the detail pane ---------------------------------------------
@lru_cache(maxsize=512)
def describe_command(command: str) -> dict[str, Any] | str:
    """The parsed signature's facts, or the parse error's one-line message (the parser is cheap)."""
    try:
        from boo_engine.api import parse_command

        return dict(parse_command(command, check=False).describe())   # syntax only: no torch on the UI thread
    except Exception as e:  # noqa: BLE001 - shown to the user, whatever the reason
        return f"{type(e).__name__}: {e}"


@lru_cache(maxsize=4096)
def shape_label(command: str) -> str:
    """The op signature's compact shape label (`n2 c64 28x28 k64 3x3 p1 NCHW fwd`), "" when it does not parse."""
    try:
        from boo_engine.api import parse_command

        return parse_command(command, check=False).shape_label
    except Exception:  # noqa: BLE001 - a bad command is a failed job: its row shows the error, not a shape
        return ""
