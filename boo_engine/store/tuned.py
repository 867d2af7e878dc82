"""The tuning store the `best` column reads: every kernel a finished `boo-tui tune` improved on THIS machine, with
the winner's configuration, read from the results database's tune tables (`tunes`, `tune_kernels`,
`tune_candidates`: store/schema.py m003).

A tune's winner counts only where it was measured on this machine: the same target (`cpu`), the same resolved
CPU (LLVM's name and its key features, as the tune's stored environment says) and the same `iree-compile
--version`. Nothing measured on another CPU (a database merged from a Zen 5 and a Zen 3, or carried from a
laptop) is used. The newest tune of a kernel wins. Looked up by kernel name (`func_name` spells every shape,
layout, dtype and mode; an aten call's carries a digest of the whole call).

A winner whose flags are not plain tuning knobs (`tuning_flag`: no linker or tool path, plugin, dump or file;
a database may come from someone else, and what it holds is compiled without being asked) is not used.
The winner becomes a Variant built our way (`base="ours"`, what the tuner measured against): the candidate's
flags, its formulation, and its tuning spec (the text the tune stored, written once to a content-named file in
the linked-spec folder, so the cache key, which holds the spec's CONTENT, finds the kernel the tune built).
"""
from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from .. import locations
from ..fsutil import atomic_write
from ..ops.base import OpSignature
from ..targets import OUR_BUILD
from ..variants import BEST_NAME, Variant

if TYPE_CHECKING:
    from .store import Store

#: the tune_kernels status of a kernel whose tune found a significantly faster configuration
IMPROVED = "improved"


@dataclass(frozen=True)
class TunedWinner:
    tune_id: int
    func_name: str
    flags: tuple[str, ...]
    formulation: str | None
    spec: str | None
    ratio: float | None

    def variant(self) -> Variant:
        """The best column's variant for this kernel: the winner, built our way."""
        specs = (str(spec_file(self.spec)),) if self.spec else ()
        func = self.func_name
        return Variant(name=BEST_NAME, base=OUR_BUILD, best=f"tune {self.tune_id}", tuning_specs=specs,
                       kernel_flags=((func, self.flags),) if self.flags else (),
                       kernel_formulations=((func, self.formulation),) if self.formulation else ())


class TuneMachine(TypedDict):
    """What a tune's stored environment must say to count on this machine (`same_machine`)."""

    target: str
    cpu_name: str | None              # LLVM's name for the resolved host CPU (None: the compiler was not asked)
    cpu_features: list[str]           # its key features (hostcpu.KEY_FEATURES present)
    iree_compile_version: str | None  # `iree-compile --version`, as the tune stored it


def this_machine() -> TuneMachine:
    """What a tune's environment must say to count here: the target, resolved CPU and compiler."""
    from ..cpu_defaults.machine import host_cpu
    from ..iree_tools import compiler_here, compiler_version

    cpu = host_cpu()
    version = compiler_version() if compiler_here() else cpu.compiler_version
    return {"target": "cpu", "cpu_name": cpu.name, "cpu_features": cpu.key_features,
            "iree_compile_version": version}


def same_machine(env: Mapping[str, Any], machine: TuneMachine) -> bool:
    """The tune's stored environment (its JSON: `collect_environment()`'s dict) is this machine's (see the module
    docstring)."""
    def first(v: object) -> str:
        return (str(v or "").strip().splitlines() or [""])[0]

    return (bool(machine.get("cpu_name")) and env.get("cpu_name") == machine.get("cpu_name")
            and sorted(env.get("cpu_features") or []) == sorted(machine.get("cpu_features") or [])
            and first(env.get("iree_compile_version")) == first(machine.get("iree_compile_version"))
            and bool(first(machine.get("iree_compile_version"))))


#: words of a flag name that make iree-compile read, write or run something outside the kernel (linker and tool
#: paths, plugins, dumps, libraries): a database may come from someone else, and the best column compiles what its
#: tunes won without being asked, so a winner with such a flag is never used
_OUTSIDE = ("path", "linker", "tool", "plugin", "dump", "file", "dir", "output", "library", "executable", "bin")
_FLAG = re.compile(r"--iree-[a-z0-9][a-z0-9-]*(=[A-Za-z0-9_.,+-]*)?")


def tuning_flag(flag: str) -> bool:
    """A flag the best column takes from a stored tune: an `--iree-...` option whose name names nothing outside the
    kernel and whose value is a plain word (no path)."""
    if not _FLAG.fullmatch(flag):
        return False
    name = flag.split("=", 1)[0]
    return not any(word in name for word in _OUTSIDE)


_WINNERS = """
SELECT t.id AS tune_id, t.target, t.environment, k.func_name, k.ratio, c.params, c.spec
FROM tune_kernels k
JOIN tunes t ON t.id = k.tune_id
JOIN tune_candidates c ON c.tune_id = k.tune_id AND c.func_name = k.func_name AND c.key = k.best_key
WHERE k.status = ?
ORDER BY t.id DESC
"""


def tuned_winners(conn: sqlite3.Connection, machine: TuneMachine) -> dict[str, TunedWinner]:
    """func_name -> the newest winner measured on `machine` (this_machine()), from an open database."""
    out: dict[str, TunedWinner] = {}
    for row in conn.execute(_WINNERS, (IMPROVED,)).fetchall():
        tune_id, target, env_text, func, ratio, params_text, spec = tuple(row)
        if func in out or target != machine.get("target"):
            continue
        try:
            env = json.loads(env_text or "{}")
            params = json.loads(params_text or "{}")
        except ValueError:
            continue
        if not isinstance(env, dict) or not isinstance(params, dict) or not same_machine(env, machine):
            continue
        flags = tuple(str(f) for f in params.get("flags") or ())
        if not all(tuning_flag(f) for f in flags):   # not a knob the tuner turns: never compiled from a database
            continue
        form = params.get("formulation")
        out[func] = TunedWinner(int(tune_id), str(func), flags, str(form) if form else None,
                                str(spec) if spec else None, float(ratio) if ratio is not None else None)
    return out


class TunedLookup:
    """The best column's lookup (variants.best.TunedLookup): kernel -> its winner's variant, or None. Reads the
    winners once, on first use (a database that cannot be read has none: the table and rules decide)."""

    def __init__(self, winners: Mapping[str, TunedWinner] | None = None, *, store: Store | None = None,
                 path: str | Path | None = None) -> None:
        """`store`: the session's Store; or `path`: a results database read as it is (never created or
        migrated: one without tune tables has no winners)."""
        self.winners = dict(winners) if winners is not None else None
        self._store = store
        self._path = path
        self._lock = threading.Lock()

    def __call__(self, sig: OpSignature) -> Variant | None:
        with self._lock:
            if self.winners is None:
                self.winners = self._read()
        winner = self.winners.get(sig.func_name)
        return winner.variant() if winner is not None else None

    def _read(self) -> dict[str, TunedWinner]:
        try:
            if self._store is not None:
                with self._store._reader() as conn:
                    return tuned_winners(conn, this_machine())
            if self._path is None or not Path(self._path).is_file():
                return {}
            conn = sqlite3.connect(f"file:{Path(self._path).resolve()}?mode=ro", uri=True, timeout=5.0)
            try:
                return tuned_winners(conn, this_machine())
            finally:
                conn.close()
        except Exception:  # noqa: BLE001 - no winners is a valid answer: the table and rules decide
            return {}


def spec_file(text: str) -> Path:
    """A tuned spec's text as a file named by its content (written once), for a variant to name."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = locations.linked_spec_dir() / f"tuned-{digest}.mlir"
    try:
        if path.read_text() == text:
            return path
    except (OSError, ValueError):
        pass
    atomic_write(path, text, make_parents=True)
    return path
