"""A machine's peaks: what its best kernels reach (measured once per machine) beside what the datasheet or the
CPU's features say it could.

Keyed by `machine_key(target, threads)`: the device (the CPU as the compiler resolves it plus the thread count;
the GPU's name, arch and driver), the IREE compiler and torch versions: a change of any of them measures again.
Kept in the results database (`peaks` table, every measurement and raise a new row) and in a small per-machine
file (`locations.peaks_file()`), so a fresh database (every test's) takes them from the file without measuring.

`get_peaks()` answers from the database, else the file, else measures (`measure_in_child`: a process of its own,
~10 s on a 2-core CPU). Peaks come from measurements only: a kernel that beats one never moves it (roofline.py).
"""
from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import locations
from ..errors import BooError
from ..fsutil import atomic_write
from ..targets import Target, parse_target
from .records import Candidate, CandidateFigure, Measurement, PeakDetails, PeakRow
from .theory import DTYPES, Theory, cpu_theory, gpu_theory

if TYPE_CHECKING:
    from ..store import Store

MEASURE_TIMEOUT_S = 300.0
_FILE_FORMAT = "boo-tui-peaks"
_MAX_ENTRIES = 32
_file_lock = threading.Lock()

#: how many measurements this process started (tests check that a stored answer is reused)
measurements = 0


class PeakError(BooError):
    """The peaks could not be measured (the measuring process failed or timed out)."""


@dataclass(frozen=True)
class Peak:
    """One ceiling: `value` in GFLOP/s (kind compute, per dtype) or GB/s (kind bandwidth, dtype None)."""

    kind: str
    dtype: str | None
    value: float
    source: str
    theoretical: float | None = None
    details: PeakDetails = field(default_factory=PeakDetails)

    @property
    def pct_of_theoretical(self) -> float | None:
        return self.value / self.theoretical * 100 if self.theoretical else None


@dataclass(frozen=True)
class Peaks:
    """A machine's ceilings for one target and thread count, and where the answer came from."""

    machine_key: str
    target: str
    threads: int
    measured_at: str
    entries: tuple[Peak, ...]
    how: str = "measured"             # measured | database | file
    seconds: float | None = None      # how long the measurement took (when measured)
    basis: str = ""                   # how the theoretical figures were derived

    def compute(self, dtype: str) -> Peak | None:
        return next((p for p in self.entries if p.kind == "compute" and p.dtype == dtype), None)

    @property
    def bandwidth(self) -> Peak | None:
        return next((p for p in self.entries if p.kind == "bandwidth"), None)

    def rows(self) -> list[PeakRow]:
        """The `peaks` table rows."""
        return [{"machine_key": self.machine_key, "target": self.target, "measured_at": self.measured_at,
                 "kind": p.kind, "dtype": p.dtype, "value": p.value, "source": p.source,
                 "theoretical": p.theoretical,
                 "details": {**p.details, "threads": self.threads, "basis": self.basis, "seconds": self.seconds}}
                for p in self.entries]

    def to_dict(self) -> dict[str, object]:
        """The peaks as the per-machine file keeps them (JSON-able)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any], how: str) -> Peaks:
        entries = tuple(Peak(**e) for e in d["entries"])
        return cls(**{**d, "entries": entries, "how": how})

    @classmethod
    def from_rows(cls, rows: list[PeakRow], threads: int) -> Peaks:
        details = rows[0].get("details") or PeakDetails()
        entries = tuple(Peak(r["kind"], r["dtype"], r["value"], r["source"] or "", r["theoretical"],
                             _peak_details(r.get("details")))
                        for r in sorted(rows, key=_order))
        return cls(rows[0]["machine_key"], rows[0]["target"], threads, max(r["measured_at"] for r in rows),
                   entries, "database", details.get("seconds"), details.get("basis") or "")

    def with_peak(self, peak: Peak) -> Peaks:
        """These peaks with `peak` in place of the one of its kind and dtype."""
        entries = tuple(peak if (p.kind, p.dtype) == (peak.kind, peak.dtype) else p for p in self.entries)
        if all((p.kind, p.dtype) != (peak.kind, peak.dtype) for p in self.entries):
            entries += (peak,)
        return dataclasses.replace(self, entries=entries, measured_at=_now())


def _order(r: PeakRow) -> tuple[int, int]:
    return _kind_order(r["kind"], r["dtype"])


def _kind_order(kind: str, dtype: str | None) -> tuple[int, int]:
    """compute first, by DTYPES; then bandwidth"""
    return (kind != "compute", DTYPES.index(dtype) if dtype in DTYPES else len(DTYPES))


def _peak_details(stored: PeakDetails | None) -> PeakDetails:
    """A stored row's details less what `Peaks.rows` added of the whole measurement (threads, basis, seconds)."""
    details = stored.copy() if stored else PeakDetails()
    details.pop("threads", None)
    details.pop("basis", None)
    details.pop("seconds", None)
    return details


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S")


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def as_target(target: Target | str, threads: int) -> Target:
    t = target if isinstance(target, Target) else parse_target(target)
    return Target("cpu", threads=threads, per_op_defaults=t.per_op_defaults) if t.kind == "cpu" else t


#: how peaks are measured, in the key: peaks taken the older way (the median of each candidate's samples, pulled
#: down by a busy machine) are measured again
MEASURE_METHOD = "best of samples"


def machine_key(target: Target | str, threads: int = 1) -> str:
    """What the peaks depend on: `cpu znver3+<features digest> x1 | iree-compiler 3.x | torch 2.x`, or the GPU's
    name, arch and driver for a GPU target."""
    t = as_target(target, threads)
    if t.kind == "cpu":
        from ..cpu_defaults.machine import host_cpu

        device = f"cpu {host_cpu().machine_key} x{threads}"
    else:
        from ..environment import gpu_info

        g = gpu_info()
        name, arch, driver = (g["name"], g["arch"], g["driver"]) if g else (None, None, None)
        device = f"{t.name} {name or 'unknown GPU'} {arch or ''} driver {driver or '?'}"
    return (f"{device} | iree-compiler {_version('iree-base-compiler')} | torch {_version('torch')}"
            f" | {MEASURE_METHOD}")


def theory_for(target: Target | str, threads: int = 1) -> Theory:
    t = as_target(target, threads)
    if t.kind == "cpu":
        from ..cpu_defaults.machine import host_cpu

        cpu = host_cpu()
        return cpu_theory(cpu.name, cpu.features, threads)
    from ..environment import gpu_info

    g = gpu_info()
    return gpu_theory(g["name"] if g else None, (g["arch"] if g else None) or t.arch)


def measure_in_child(target: Target | str, threads: int = 1, timeout_s: float = MEASURE_TIMEOUT_S) -> Measurement:
    """`measure.measure_peaks` in a process of its own; its JSON answer. Raises PeakError."""
    global measurements
    measurements += 1
    t = as_target(target, threads)
    cmd = [sys.executable, "-m", "boo_engine.limits.measure", "--target", t.name, "--threads", str(threads)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout_s,
                              start_new_session=True)
    except subprocess.TimeoutExpired:
        raise PeakError(f"measuring the peaks took over {timeout_s:.0f} s") from None
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise PeakError(f"measuring the peaks failed: {last}")
    answer: Measurement = json.loads(lines[-1])   # a line that starts with '{' is an object
    return answer


def build_peaks(raw: Measurement, target: Target | str, threads: int, key: str) -> Peaks:
    """The best candidate of each kind and dtype, with the theoretical figure beside it."""
    theory = theory_for(target, threads)
    best: dict[tuple[str, str | None], Candidate] = {}
    for c in raw["candidates"]:
        k = (c["kind"], c["dtype"])
        if k not in best or c["value"] > best[k]["value"]:
            best[k] = c
    entries = []
    for (kind, dtype), c in sorted(best.items(), key=lambda kv: _kind_order(*kv[0])):
        others = [CandidateFigure(source=o["source"], value=o["value"]) for o in raw["candidates"]
                  if (o["kind"], o["dtype"]) == (kind, dtype)]
        theo = theory.compute.get(dtype or "") if kind == "compute" else theory.bandwidth
        details = PeakDetails(candidates=others)
        if raw.get("errors"):
            details["errors"] = raw["errors"]
        entries.append(Peak(kind, dtype, float(c["value"]), c["source"], theo, details))
    if not any(p.kind == "bandwidth" for p in entries) or not any(p.kind == "compute" for p in entries):
        raise PeakError("measuring the peaks gave no " + ("compute" if entries else "") + " result: "
                        + "; ".join(raw.get("errors") or ["no candidate ran"]))
    return Peaks(key, as_target(target, threads).name, threads, _now(), tuple(entries), "measured",
                 raw.get("seconds"), theory.basis)


# ---- the per-machine file ----------------------------------------------------------------------------------

def _file_key(key: str, target: str) -> str:
    return f"{target} || {key}"


def load_file(key: str, target: str) -> Peaks | None:
    path = locations.peaks_file()
    try:
        data = json.loads(path.read_text())
        entry = data["entries"][_file_key(key, target)] if data.get("format") == _FILE_FORMAT else None
        return Peaks.from_dict(entry, "file") if entry else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


_unwritable: set[str] = set()
_notices: list[str] = []


def take_notices() -> list[str]:
    """What the file side has to say (once each per process), emptied: a front end shows them."""
    with _file_lock:
        out = list(_notices)
        _notices.clear()
    return out


def save_file(peaks: Peaks) -> None:
    """Remember the peaks in the per-machine file (best effort: a file that cannot be written costs a measurement
    next time, never the run). A file that cannot be written is said once per process (`take_notices`): each
    fresh results database would otherwise measure the peaks again (~8 s) without a word."""
    path = locations.peaks_file()
    with _file_lock:
        try:
            _write_file(path, peaks)
        except OSError as e:
            if str(path) not in _unwritable:
                _unwritable.add(str(path))
                _notices.append(f"peaks not remembered in {path} ({e.strerror or e}): a new results database will "
                                f"measure them again (set {locations.PEAKS_FILE_ENV} to a writable file)")


def _write_file(path: Path, peaks: Peaks) -> None:
    try:
        data = json.loads(path.read_text())
        entries = dict(data["entries"]) if data.get("format") == _FILE_FORMAT else {}
    except (OSError, ValueError, KeyError, TypeError):
        entries = {}
    entries.pop(_file_key(peaks.machine_key, peaks.target), None)
    entries[_file_key(peaks.machine_key, peaks.target)] = {**peaks.to_dict(), "how": "file"}
    entries = dict(list(entries.items())[-_MAX_ENTRIES:])
    atomic_write(path, json.dumps({"format": _FILE_FORMAT, "entries": entries}, indent=1), make_parents=True)


# ---- the answer --------------------------------------------------------------------------------------------

def get_peaks(target: Target | str, threads: int = 1, store: Store | None = None, *, remeasure: bool = False,
              run_id: int | None = None, keep_higher: Peaks | None = None) -> Peaks:
    """The machine's peaks for `target` and `threads`: from `store`, else the per-machine file (then stored in
    `store`), else measured now (then stored in both). `remeasure` measures whatever is stored; `keep_higher`:
    a peak of these that the new measurement does not reach is kept (a noisy host must not lower a ceiling).
    Raises PeakError."""
    t = as_target(target, threads)
    key = machine_key(t, threads)
    if not remeasure:
        if store is not None:
            rows = store.peaks(key, t.name)
            if rows and not _raised(stored := Peaks.from_rows(rows, threads)):
                return stored
        found = load_file(key, t.name)
        if found is not None and not _raised(found):
            if store is not None:
                store.save_peaks(found.rows(), run_id)
            return found
    peaks = build_peaks(measure_in_child(t, threads), t, threads, key)
    if keep_higher is not None:
        peaks = merge_higher(keep_higher, peaks)
    if store is not None:
        store.save_peaks(peaks.rows(), run_id)
    save_file(peaks)
    return peaks


def _raised(peaks: Peaks) -> bool:
    """Peaks an older boo-tui moved to what a kernel achieved (source "achieved by <kernel>"): not a measurement
    of the machine, so they are measured again."""
    return any(p.source.startswith("achieved by ") for p in peaks.entries)


def merge_higher(old: Peaks, fresh: Peaks) -> Peaks:
    """`fresh`, with each peak of `old` that is higher in its place."""
    merged = fresh
    for p in old.entries:
        q = fresh.compute(p.dtype or "") if p.kind == "compute" else fresh.bandwidth
        if q is None or p.value > q.value:
            merged = merged.with_peak(p)
    return merged
