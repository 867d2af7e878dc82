"""IREE's command-line tools (iree-compile, iree-opt; the runtime's iree-benchmark-module, iree-profile): where
they are, running one, reading its errors.

One place for what variants (spec pre-flight, linking), compile (the compiler runner, the cache key) and environment
(the recorded compiler version) all need, so they agree on WHICH binary they mean: the one shipped in the installed
iree-base-compiler wheel, the same build `iree.compiler` compiles with, and only without the wheel one from PATH
(a PATH iree-compile may be another build altogether). The runtime's tools likewise come from the installed
iree-base-runtime wheel, the build the worker measures with (bench/ireeprof.py profiles with them).

A low layer: imports nothing of the engine but errors, and never imports iree.compiler (~70 ms) nor the runtime:
the wheels' folders are found with importlib.util.find_spec.
"""
from __future__ import annotations

import functools
import importlib.util
import re
import shutil
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path

from .errors import BooError

#: how long `iree-compile --version` may take (it answers in ~0.1 s; a cold disk can make it seconds)
VERSION_TIMEOUT_S = 60.0


@functools.lru_cache(maxsize=1)
def _wheel_tools_dir() -> Path | None:
    """The iree-base-compiler wheel's folder of binaries (iree/compiler/_mlir_libs), or None without the wheel."""
    try:
        spec = importlib.util.find_spec("iree.compiler")
    except (ImportError, ValueError):
        return None
    for loc in (spec.submodule_search_locations or []) if spec else []:
        d = Path(loc) / "_mlir_libs"
        if d.is_dir():
            return d
    return None


@functools.lru_cache(maxsize=1)
def _runtime_tools_dir() -> Path | None:
    """The iree-base-runtime wheel's folder of binaries (iree/_runtime_libs: iree-benchmark-module, iree-profile,
    iree-run-module), or None without the wheel. Found without importing it (that would load the runtime)."""
    try:
        spec = importlib.util.find_spec("iree._runtime_libs")
    except (ImportError, ValueError):
        return None
    for loc in (spec.submodule_search_locations or []) if spec else []:
        if Path(loc).is_dir():
            return Path(loc)
    return None


def find_runtime_tool(name: str) -> str | None:
    """Absolute path of an IREE runtime tool from the installed iree-base-runtime wheel (the runtime the worker
    measures with), else from PATH, else None."""
    d = _runtime_tools_dir()
    if d is not None and (d / name).is_file():
        return str(d / name)
    return shutil.which(name)


def find_tool(name: str) -> str | None:
    """Absolute path of an IREE tool from the installed iree-base-compiler wheel, else from PATH, else None."""
    d = _wheel_tools_dir()
    if d is not None and (d / name).is_file():
        return str(d / name)
    return shutil.which(name)


def compiler_here() -> bool:
    """Is an iree-compile installed here? Without one (a GPU box measuring a cache filled elsewhere) nothing is
    exported, compiled or pre-flighted (compile.build, variants.preflight)."""
    return find_tool("iree-compile") is not None


def tool_path(name: str, error: type[BooError] = BooError) -> str:
    """`find_tool(name)`, or raise `error` "NAME not found: install iree-base-compiler"."""
    exe = find_tool(name)
    if not exe:
        raise error(f"{name} not found: install iree-base-compiler")
    return exe


def run_tool(args: Sequence[str], timeout_s: float = 60.0, *, error: type[BooError] = BooError
             ) -> subprocess.CompletedProcess[str]:
    """Run a short-lived tool (iree-opt on one file, `--version`, `--help-list-hidden`) and capture its output as
    text. Past `timeout_s` it is killed and `error` "TOOL timed out after N s on LAST_ARG" raised. A compile is NOT
    run here: it goes through compile.compiler_run (its own process group, stall detection)."""
    argv = [str(a) for a in args]
    try:
        return subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise error(f"{Path(argv[0]).name} timed out after {timeout_s:.0f} s on {argv[-1]}") from None


def first_error(output: str, *, located: bool = False, limit: int | None = 300, empty: str = "no output") -> str:
    """The first `error:` of an MLIR tool's output as one line: the message after `error:`, with (`located`) the
    diagnostic's `path:L:C:` shortened to `line L:C: `. Without an `error:` line: the first non-blank line, else
    `empty`. At most `limit` characters (None: no limit)."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    text = None
    for ln in lines:
        if "error:" in ln:
            loc, _, msg = ln.partition("error:")
            m = re.search(r":(\d+):(\d+):\s*$", loc) if located else None
            text = (f"line {m.group(1)}:{m.group(2)}: " if m else "") + msg.strip()
            break
    if text is None:
        text = lines[0] if lines else empty
    return text if limit is None else text[:limit]


def compiler_stamp(exe: str) -> str:
    """Identifies a compiler build cheaply, without running it: path, size and mtime of the binary and of its
    library. What per-build memos (the kernel cache's version, the resolved host CPU) are keyed on."""
    parts = []
    for p in (Path(exe), Path(exe).parent / "libIREECompiler.so"):
        try:
            st = p.stat()
        except OSError:
            continue
        parts.append(f"{p}:{st.st_size}:{st.st_mtime_ns}")
    return "|".join(parts)


_versions: dict[str, str] = {}
_versions_lock = threading.Lock()


def compiler_version(exe: str | None = None, *, error: type[BooError] = BooError,
                     timeout_s: float = VERSION_TIMEOUT_S) -> str:
    """`iree-compile --version` of `exe` (default: `tool_path("iree-compile")`) as one line: every line naming a
    version ("IREE compiler version 3.13.0 @ <hash> LLVM version 21.0.0git"), else the whole output, else "unknown".
    Run once per binary per process; the kernel cache remembers it across processes per compiler build. Raises
    `error` when the tool is missing or does not answer in `timeout_s`, OSError when it cannot start."""
    exe = exe or tool_path("iree-compile", error)
    with _versions_lock:
        known = _versions.get(exe)
    if known is not None:
        return known
    proc = run_tool([exe, "--version"], timeout_s, error=error)
    lines = [ln.strip() for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    version = " ".join(ln for ln in lines if "version" in ln.lower()) or " ".join(lines) or "unknown"
    with _versions_lock:
        _versions[exe] = version
    return version
