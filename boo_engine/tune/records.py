"""The tuner's records (`TunedKernel`, `Tried`) and how they live in the results database (the tune tables of
store/schema.py m003), written through the store's writer thread (`Store.execute`), read with its reader.

Everything a tune learns is stored as it learns it: a killed tune resumes from these rows (`--resume`), and a
finished one can be reviewed later (every candidate's configuration, compile status, samples' run and verdict).
"""
from __future__ import annotations

import datetime
import json
import sqlite3
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from ..compare import geomean
from ..errors import BooError
from ..store import Store

if TYPE_CHECKING:
    from .space import CandidateParams

#: a candidate's status
MEASURED, COMPILE_FAILED, NOT_APPLIED, NUMERICS_FAILED, FAILED, DUPLICATE = (
    "measured", "compile_failed", "not_applied", "numerics_failed", "failed", "duplicate")
#: a kernel's status
RUNNING, IMPROVED, NO_BETTER, KERNEL_FAILED = "running", "improved", "no_better", "failed"


class KernelRoot(TypedDict):
    """A kernel's root op as its baseline built it (search._root_summary), stored as JSON with the kernel."""

    dispatch: str
    op: str
    kind: str
    bounds: list[int]
    types: list[str]
    pipeline: str
    cpu: str | None
    tiles: dict[str, list[int]]


class TuneRow(TypedDict):
    """A row of the tunes table (store/schema.py), its settings parsed."""

    id: int
    started_at: str
    finished_at: str | None
    status: str
    command_line: str | None
    target: str | None
    out_dir: str | None
    settings: dict[str, Any]       # JSON: TuneSettings.to_dict() and the inputs
    environment: str | None        # JSON text, as stored


class TuneSummary(TuneRow):
    """A tune as `list_tunes` lists it: its row, its kernels, how many improved and the geomean ratio."""

    kernels: int
    improved: int
    geomean: float | None


@dataclass
class Tried:
    """One candidate on one kernel, and what became of it."""

    func_name: str
    key: str
    params: CandidateParams        # a Candidate's, as stored (JSON)
    variant: str
    description: str = ""
    spec: str | None = None
    stage: str = "screen"
    status: str = MEASURED
    error: str | None = None
    compile_seconds: float | None = None
    artifact_key: str | None = None
    median_us: float | None = None
    baseline_us: float | None = None
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    verdict: str | None = None
    job_id: str | None = None
    run_id: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == MEASURED and self.ratio is not None


@dataclass
class TunedKernel:
    """A kernel's outcome: the baseline, the best candidate found and the final verdict."""

    func_name: str
    command: str
    status: str = RUNNING
    root: KernelRoot | None = None
    baseline_us: float | None = None
    best_key: str | None = None
    best_us: float | None = None
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    verdict: str | None = None
    message: str = ""
    candidates: int = 0
    seconds: float = 0.0
    tried: list[Tried] = field(default_factory=list)

    @property
    def best(self) -> Tried | None:
        return next((t for t in self.tried if t.key == self.best_key), None)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


class TuneRecords:
    """The tune's rows in `store` (the session's store: one writer for the file)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.tune_id: int | None = None

    def start(self, *, command_line: str, target: str, out_dir: str, settings: Mapping[str, Any],
              environment: Mapping[str, Any]) -> int:
        def fn(c: sqlite3.Connection) -> int:
            cur = c.execute(
                "INSERT INTO tunes (started_at, status, command_line, target, out_dir, settings, environment)"
                " VALUES (?, 'running', ?, ?, ?, ?, ?)",
                (_now(), command_line, target, out_dir, json.dumps(settings), json.dumps(environment, default=str)))
            return int(cur.lastrowid or 0)

        self.tune_id = int(self.store.execute("start tune", fn))
        return self.tune_id

    def reopen(self, tune_id: int) -> None:
        self.tune_id = tune_id
        self.store.execute("resume tune", lambda c: c.execute(
            "UPDATE tunes SET status = 'running', finished_at = NULL WHERE id = ?", (tune_id,)))

    def finish(self, status: str) -> None:
        tid = self._id()
        self.store.execute("finish tune", lambda c: c.execute(
            "UPDATE tunes SET status = ?, finished_at = ? WHERE id = ?", (status, _now(), tid)))

    def link_run(self, run_id: int) -> None:
        tid = self._id()
        self.store.execute("tune run", lambda c: c.execute(
            "INSERT OR IGNORE INTO tune_runs (tune_id, run_id) VALUES (?, ?)", (tid, run_id)))

    def save_candidate(self, t: Tried) -> None:
        tid = self._id()
        row = asdict(t)
        row.pop("description")
        row["params"] = json.dumps({**t.params, "description": t.description})
        row.update(tune_id=tid, updated_at=_now())
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        self.store.execute("tune candidate", lambda c: c.execute(
            f"INSERT OR REPLACE INTO tune_candidates ({cols}) VALUES ({marks})", tuple(row.values())))

    def save_kernel(self, k: TunedKernel) -> None:
        tid = self._id()
        row = {f: getattr(k, f) for f in ("func_name", "command", "status", "baseline_us", "best_key", "best_us",
                                          "ratio", "ci_low", "ci_high", "p_value", "verdict", "message",
                                          "candidates", "seconds")}
        row["root"] = json.dumps(k.root) if k.root is not None else None
        row["tune_id"] = tid
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        self.store.execute("tune kernel", lambda c: c.execute(
            f"INSERT OR REPLACE INTO tune_kernels ({cols}) VALUES ({marks})", tuple(row.values())))

    def _id(self) -> int:
        if self.tune_id is None:
            raise BooError("internal error: the tune was not started")
        return self.tune_id


# ---- reading -----------------------------------------------------------------------------------------------

def _tune_row(row: sqlite3.Row) -> TuneRow:
    return TuneRow(id=row["id"], started_at=row["started_at"], finished_at=row["finished_at"], status=row["status"],
                   command_line=row["command_line"], target=row["target"], out_dir=row["out_dir"],
                   settings=json.loads(row["settings"] or "{}"), environment=row["environment"])


def find_tune(store: Store, which: int | str) -> TuneRow:
    """The tune `which` names (an id, or "last"), as a dict; BooError (one line) when there is none."""
    with store._reader() as c:
        if str(which) == "last":
            row = c.execute("SELECT * FROM tunes ORDER BY julianday(started_at) DESC, id DESC LIMIT 1").fetchone()
        else:
            try:
                tid = int(which)
            except ValueError:
                raise BooError(f"--resume {which!r}: expected a tune id or 'last'") from None
            row = c.execute("SELECT * FROM tunes WHERE id = ?", (tid,)).fetchone()
    if row is None:
        raise BooError(f"no tune {which!r} in {store.path}" if str(which) != "last" else f"no tune in {store.path}")
    return _tune_row(row)


def load_kernels(store: Store, tune_id: int) -> dict[str, TunedKernel]:
    """Every kernel of a tune with its candidates, as stored."""
    with store._reader() as c:
        krows = c.execute("SELECT * FROM tune_kernels WHERE tune_id = ?", (tune_id,)).fetchall()
        crows = c.execute("SELECT * FROM tune_candidates WHERE tune_id = ? ORDER BY rowid", (tune_id,)).fetchall()
    out: dict[str, TunedKernel] = {}
    for r in krows:
        d = dict(r)
        d.pop("tune_id")
        d["root"] = json.loads(d["root"]) if d.get("root") else None
        out[d["func_name"]] = TunedKernel(**d)
    for r in crows:
        d = dict(r)
        for drop in ("tune_id", "updated_at"):
            d.pop(drop, None)
        params = json.loads(d.pop("params") or "{}")
        desc = params.pop("description", "")
        k = out.get(d["func_name"])
        if k is not None:
            k.tried.append(Tried(params=params, description=desc, **d))
    return out


def list_tunes(store: Store, limit: int = 50) -> list[TuneSummary]:
    """Newest first: each tune's row (settings parsed) with `kernels`, `improved` and `geomean`, the geometric
    mean of each kernel's time against its default (1.0 where nothing better was found), as report.md gives it."""
    with store._reader() as c:
        rows = [_tune_row(r) for r in c.execute(   # newest first by time, also after a merge
            "SELECT * FROM tunes ORDER BY julianday(started_at) DESC, id DESC LIMIT ?", (limit,)).fetchall()]
        ids = [int(r["id"]) for r in rows]
        marks = ", ".join("?" for _ in ids)
        kernels = c.execute(f"SELECT tune_id, status, ratio, baseline_us FROM tune_kernels WHERE tune_id IN ({marks})",
                            ids).fetchall() if ids else []
    by_tune: dict[int, list[sqlite3.Row]] = {}
    for k in kernels:
        by_tune.setdefault(int(k["tune_id"]), []).append(k)
    out: list[TuneSummary] = []
    for r in rows:
        ks = by_tune.get(int(r["id"]), [])
        ratios = [float(k["ratio"]) if k["status"] == IMPROVED and k["ratio"] else 1.0 for k in ks if k["baseline_us"]]
        out.append(TuneSummary(**r, kernels=len(ks), improved=sum(1 for k in ks if k["status"] == IMPROVED),
                               geomean=geomean(ratios) if ratios else None))
    return out
