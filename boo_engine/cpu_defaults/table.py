"""The per-machine table of per-op-class CPU flags: what `tune --defaults` measured on this machine, which
`cpu_defaults.machine.per_op_default_flags` applies before its feature-keyed rules.

One JSON file (`locations.defaults_table()`, default ~/.cache/boo-tui/cpu-defaults.json) holds one entry per
machine, keyed by the resolved CPU (LLVM name + a digest of its features, `HostCpu.machine_key`) and the
`iree-compile --version`, so a table measured on another CPU or with another compiler is never applied:

    {"format": "boo-tui-cpu-defaults", "format_version": 1,
     "machines": {"znver3+befe676f1852|IREE compiler version 3.13.0 @ ...": {
         "cpu": "znver3", "features": ["avx2", "fma", "f16c"], "compiler_version": "IREE compiler version ...",
         "measured_at": "2026-11-22T21:30:00+00:00", "min_effect": 0.03,
         "classes": {"conv:bfloat16:nhwc:1x1:forward": {
             "flags": [],                                   <- what the class's kernels are compiled with
             "winner": "IREE default", "commands": ["convbfp16 -n 4 ..."],
             "candidates": {"IREE default": {"flags": [], "geomean_us": 690.0},
                            "data-tiling": {"flags": ["--iree-opt-data-tiling"], "geomean_us": 19400.0,
                                            "ratio": 28.1, "ci": [27.5, 28.8], "verdict": "slower"},
                            "im2col": {"flags": [...], "error": "first line of the compiler's error"}}}}}}}

Only `flags`, `formulation` (how the `best` column writes the class's kernels, when measured; absent in a
table written before formulations were measured) and `build` ("boo" where BOO's own build was fastest) are read
back; the rest says why. A file that cannot be read as
this format is ignored with one warning line (never a traceback) and the rules decide; `tune --defaults` then
writes a whole new file.
A leaf module: imports only locations and fsutil.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import locations
from ..fsutil import atomic_write

FORMAT = "boo-tui-cpu-defaults"
FORMAT_VERSION = 1


def machine_key(cpu_key: str, compiler_version: str | None) -> str:
    """The entry of one machine: `HostCpu.machine_key` and the compiler version, e.g. `znver3+befe...|IREE ...`."""
    return f"{cpu_key}|{compiler_version or 'unknown compiler'}"


@dataclass(frozen=True)
class TableState:
    """What the table says for one machine."""

    path: Path | None                   # None: tables are switched off ($BOO_DEFAULTS_TABLE=off)
    classes: dict[str, tuple[str, ...]] = field(default_factory=dict)   # op class -> flags; {} when none apply
    #: op class -> the formulation `tune --defaults` chose for the `best` column ("default" included); only
    #: classes whose formulations were measured
    formulations: dict[str, str] = field(default_factory=dict)
    #: op class -> "boo" where BOO's own build measured fastest here (the `best` column then takes it)
    builds: dict[str, str] = field(default_factory=dict)
    #: op class -> flags the `best` column adds (with its formulation, or flags that tuning specs cannot take)
    best_flags: dict[str, tuple[str, ...]] = field(default_factory=dict)
    digest: str | None = None           # of `classes` (sha256 of their canonical JSON, 12 hex): None when empty
    warning: str | None = None          # one line when the file exists but is ignored

    @property
    def in_use(self) -> bool:
        return bool(self.classes)

    def describe(self) -> dict[str, Any]:
        """JSON-able: where the flags of a run's baselines came from."""
        if not self.in_use:
            d: dict[str, Any] = {"source": "rules"}
        else:
            d = {"source": "table", "path": str(self.path), "digest": self.digest, "classes": len(self.classes)}
        if self.warning:
            d["warning"] = self.warning
        return d


def classes_digest(classes: dict[str, tuple[str, ...]] | dict[str, list[str]]) -> str:
    canon = json.dumps({k: list(v) for k, v in sorted(classes.items())}, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()[:12]


_cache: dict[tuple[str, str], tuple[tuple[int, int], TableState]] = {}
_cache_lock = threading.Lock()


def read_state(key: str, path: Path | None) -> TableState:
    """The table's classes for machine `key` from `path` (`locations.defaults_table()`; None: tables switched
    off). Never raises: a missing file or machine gives no classes; a damaged file gives no classes and a
    `warning`. Re-read only when the file changes (size, mtime)."""
    if path is None:
        return TableState(path=None)
    try:
        st = os.stat(path)
    except OSError:
        return TableState(path=path)
    stamp = (st.st_size, st.st_mtime_ns)
    with _cache_lock:
        hit = _cache.get((str(path), key))
        if hit is not None and hit[0] == stamp:
            return hit[1]
    state = _parse(path, key)
    with _cache_lock:
        _cache[(str(path), key)] = (stamp, state)
    return state


def _parse(path: Path, key: str) -> TableState:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        return TableState(path=path, warning=_warn(path, f"cannot be read ({e.strerror or e})"))
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        return TableState(path=path, warning=_warn(path, f"is not valid JSON ({str(e).splitlines()[0][:80]})"))
    problem = check_document(doc)
    if problem:
        return TableState(path=path, warning=_warn(path, problem))
    entry = doc["machines"].get(key)
    if entry is None:
        return TableState(path=path)
    classes = {name: tuple(c["flags"]) for name, c in entry["classes"].items()}
    forms = {name: c["formulation"] for name, c in entry["classes"].items() if isinstance(c.get("formulation"), str)}
    builds = {name: c["build"] for name, c in entry["classes"].items() if c.get("build") == "boo"}
    best = {name: tuple(c["best_flags"]) for name, c in entry["classes"].items() if c.get("best_flags")}
    keyed: dict[str, tuple[str, ...]] = {**classes, **{f"{k}#formulation": (v,) for k, v in forms.items()},
                                         **{f"{k}#best": v for k, v in best.items()}}
    digest = classes_digest(keyed) if classes else None
    return TableState(path=path, classes=classes, formulations=forms, builds=builds, best_flags=best, digest=digest)


def _warn(path: Path, problem: str) -> str:
    return f"ignoring the CPU defaults table {path}: it {problem}; the built-in rules decide"


def check_document(doc: object) -> str | None:
    """None when `doc` (parsed JSON, of any shape) is a whole table, else what is wrong with it (a few words)."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        return f"is not a {FORMAT} file"
    if doc.get("format_version") != FORMAT_VERSION:
        return f"has format_version {doc.get('format_version')!r}, not {FORMAT_VERSION}"
    machines = doc.get("machines")
    if not isinstance(machines, dict):
        return "has no machines"
    for mkey, entry in machines.items():
        classes = entry.get("classes") if isinstance(entry, dict) else None
        if not isinstance(classes, dict):
            return f"has a machine without classes ({str(mkey)[:40]})"
        for cname, c in classes.items():
            flags = c.get("flags") if isinstance(c, dict) else None
            if not _flag_list(flags):
                return f"has a class without a list of flags ({str(cname)[:60]})"
            if c.get("best_flags") is not None and not _flag_list(c.get("best_flags")):
                return f"has a class whose best_flags are not a list of flags ({str(cname)[:60]})"
            if c.get("formulation") is not None and not isinstance(c.get("formulation"), str):
                return f"has a class whose formulation is not a name ({str(cname)[:60]})"
    return None


def _flag_list(flags: object) -> bool:
    return isinstance(flags, list) and all(isinstance(f, str) and f.startswith("-") for f in flags)


def store_machine(key: str, entry: dict[str, Any], path: Path | None = None) -> tuple[Path, str | None]:
    """Merge `entry` (with its "classes") into machine `key` of the table at `path` (default
    `locations.defaults_table()`): its classes replace the same classes, other classes and machines stay. A damaged
    file is replaced. Written atomically. Returns (path, warning about a replaced damaged file or None). Raises
    OSError when it cannot be written, ValueError when tables are switched off."""
    path = path or locations.defaults_table()
    if path is None:
        raise ValueError(f"CPU defaults tables are switched off (${locations.DEFAULTS_TABLE_ENV})")
    warning = None
    doc: Any = None
    if Path(path).exists():
        try:
            doc = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            doc = None
        problem = "is not valid JSON" if doc is None else check_document(doc)
        if problem:
            warning = f"replacing the CPU defaults table {path}: it {problem}"
            doc = None
    if doc is None:
        doc = {"format": FORMAT, "format_version": FORMAT_VERSION, "machines": {}}
    old = doc["machines"].get(key) or {}
    merged = {**old, **{k: v for k, v in entry.items() if k != "classes"}}
    merged["classes"] = {**(old.get("classes") or {}), **entry.get("classes", {})}
    doc["machines"][key] = merged
    atomic_write(path, json.dumps(doc, indent=1, sort_keys=False) + "\n", make_parents=True)
    return Path(path), warning
