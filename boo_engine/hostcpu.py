"""The host CPU as IREE's `--iree-llvmcpu-target-cpu=host` resolves it: LLVM's CPU name (znver3, znver5,
sapphirerapids, ...) and the features that decide which kernels and flags are fast (AVX-512, native bf16 / fp16
dot products, AMX).

/proc/cpuinfo's model name can read "AMD EPYC" on a Zen 3 and on a Zen 5 alike, and the best compiler flags differ
between them by up to 28x, so the name LLVM resolved is what results record and what per-op defaults are keyed on.
The authoritative answer is the compiler's own: compiling a tiny module to executable sources (~0.15 s) writes
the executable target, `cpu = "znver3", cpu_features = "+avx2,...,-avx512f,..."`. The answer is remembered in a
small JSON file (`locations.host_cpu_file()`) per host CPU identity and compiler build, so a process pays a file
read. Without a working compiler, /proc/cpuinfo's flags answer (name None), and nothing is remembered.

A leaf module: imports nothing of the engine above iree_tools, locations and fsutil. The target flags it compiles
with are the caller's (targets.py owns them).
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import platform
import re
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from . import iree_tools, locations
from .errors import BooError
from .fsutil import atomic_write

#: the features that decide CPU kernel speed and per-op defaults, in LLVM's spelling (what results show)
KEY_FEATURES = ("avx2", "fma", "f16c", "avx512f", "avx512bf16", "avx512fp16", "avx512vnni",
                "amx-tile", "amx-bf16", "amx-fp16")
#: /proc/cpuinfo's spelling -> LLVM's, where they differ
_CPUINFO_NAMES = {"avx512_bf16": "avx512bf16", "avx512_fp16": "avx512fp16", "avx512_vnni": "avx512vnni",
                  "amx_tile": "amx-tile", "amx_bf16": "amx-bf16", "amx_fp16": "amx-fp16"}
#: the smallest module that gets a dispatch, hence an executable target carrying the resolved CPU
_PROBE_MLIR = """func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = arith.addf %a, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""
PROBE_TIMEOUT_S = 60.0
_FILE_FORMAT = "boo-tui-host-cpu"
_MAX_ENTRIES = 32


@dataclass(frozen=True)
class HostCpu:
    """The host CPU as the compiler targets it."""

    name: str | None                 # LLVM's CPU name ("znver3"); None when the compiler could not be asked
    features: frozenset[str]         # every enabled target feature (LLVM's spelling)
    source: str                      # "iree-compile" or "/proc/cpuinfo"
    compiler_version: str | None = None   # the `iree-compile --version` that resolved it

    def has(self, *names: str) -> bool:
        """True when any of `names` is enabled."""
        return any(n in self.features for n in names)

    @property
    def key_features(self) -> list[str]:
        """The KEY_FEATURES present, in KEY_FEATURES order (what results and exports show)."""
        return [f for f in KEY_FEATURES if f in self.features]

    @property
    def digest(self) -> str:
        """A short digest of the full feature set: two CPUs with one LLVM name can still differ (a VM masking
        AVX-512 off a Zen 4), and the kernels follow the features."""
        return hashlib.sha256(",".join(sorted(self.features)).encode()).hexdigest()[:12]

    @property
    def machine_key(self) -> str:
        """`znver3+<digest>`: what per-machine tables are keyed on (with the compiler version)."""
        return f"{self.name or 'unknown'}+{self.digest}"

    def label(self) -> str:
        """`znver3 (avx2 fma f16c)`: one line for headers."""
        return f"{self.name or 'unknown CPU'} ({' '.join(self.key_features) or 'no key features'})"


@functools.cache
def last_level_cache_bytes() -> int | None:
    """The largest cache of cpu0 (the last level), from sysfs; None when it does not say. Cold-cache flushes
    (bench/flush.py) and the streaming peak (limits/) size their buffers from it."""
    import glob

    best = None
    for d in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*"):
        try:
            size = Path(d, "size").read_text().strip().upper()
        except OSError:
            continue
        m = re.fullmatch(r"(\d+)([KMG]?)", size)
        if m:
            n = int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]
            best = max(best or 0, n)
    return best


def host_cpu_identity() -> str:
    """A stable name for the host CPU as LLVM's `host` resolution sees it: vendor, family, model, stepping and a
    digest of the feature flags (cpuid decides both the CPU name and the features LLVM targets)."""
    fields = _cpuinfo_fields()
    flags = " ".join(sorted((fields.get("flags") or fields.get("Features") or "").split()))
    parts = [platform.machine(), fields.get("vendor_id", ""), fields.get("cpu family", ""),
             fields.get("model", ""), fields.get("stepping", ""), fields.get("model name", platform.processor())]
    digest = hashlib.sha256(flags.encode()).hexdigest()[:12]
    return "/".join(p.replace("/", "_") for p in parts) + f"/features-{digest}"


def _cpuinfo_fields() -> dict[str, str]:
    """The first processor's block of /proc/cpuinfo (all cores of a machine are the same model); {} elsewhere."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


def cpuinfo_host_cpu() -> HostCpu:
    """The fallback: /proc/cpuinfo's flags in LLVM's spelling, no CPU name."""
    fields = _cpuinfo_fields()
    flags = (fields.get("flags") or fields.get("Features") or "").split()
    return HostCpu(name=None, features=frozenset(_CPUINFO_NAMES.get(f, f) for f in flags), source="/proc/cpuinfo")


def parse_target_attribute(text: str) -> tuple[str, frozenset[str]] | None:
    """(cpu name, enabled features) from the first `cpu = "...", cpu_features = "..."` of compiler output; None
    when there is none. A feature listed twice counts as its last mention (LLVM's rule)."""
    name = re.search(r'\bcpu = "([^"]+)"', text)
    feats = re.search(r'\bcpu_features = "([^"]*)"', text)
    if name is None or feats is None:
        return None
    state: dict[str, bool] = {}
    for item in feats.group(1).split(","):
        item = item.strip()
        if len(item) > 1 and item[0] in "+-":
            state[item[1:]] = item[0] == "+"
    return name.group(1), frozenset(f for f, on in state.items() if on)


_lock = threading.Lock()


def resolve_host_cpu(target_flags: Sequence[str], *, cache_file: Path | None = None) -> HostCpu:
    """The host CPU as iree-compile resolves it for `target_flags` (the cpu target's flags, from targets.py).
    Remembered per (host CPU identity, compiler build) in `cache_file` (default `locations.host_cpu_file()`) and
    per process. Never raises: without a compiler that answers, /proc/cpuinfo's view (name None)."""
    exe = iree_tools.find_tool("iree-compile")
    if exe is None:
        return cpuinfo_host_cpu()
    path = cache_file or locations.host_cpu_file()
    return _resolve(exe, iree_tools.compiler_stamp(exe), tuple(target_flags), str(path))


@functools.lru_cache(maxsize=16)
def _resolve(exe: str, stamp: str, target_flags: tuple[str, ...], path: str) -> HostCpu:
    key = f"{host_cpu_identity()}|{stamp}|{' '.join(target_flags)}"
    with _lock:
        entries = _read_entries(Path(path))
        known = _entry_cpu(entries.get(key))
        if known is not None:
            return known
        cpu = _probe(exe, target_flags)
        if cpu is None:
            return cpuinfo_host_cpu()
        entries[key] = {"name": cpu.name, "features": sorted(cpu.features), "compiler_version": cpu.compiler_version}
        while len(entries) > _MAX_ENTRIES:
            entries.pop(next(iter(entries)))
        with contextlib.suppress(OSError):  # a read-only home: asked again next time, that is all
            atomic_write(path, json.dumps({"format": _FILE_FORMAT, "entries": entries}, indent=1) + "\n",
                         make_parents=True)
        return cpu


def _read_entries(path: Path) -> dict[str, object]:
    """The remembered answers by key, each as the file has it (`_entry_cpu` checks one before it is used)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict) or doc.get("format") != _FILE_FORMAT or not isinstance(doc.get("entries"), dict):
        return {}
    return dict(doc["entries"])


def _entry_cpu(entry: object) -> HostCpu | None:
    """A remembered answer, if it is whole (a damaged entry is asked again)."""
    if not isinstance(entry, dict):
        return None
    name, feats, version = entry.get("name"), entry.get("features"), entry.get("compiler_version")
    if not isinstance(name, str) or not name or not isinstance(feats, list) \
            or not all(isinstance(f, str) for f in feats) or not isinstance(version, (str, type(None))):
        return None
    return HostCpu(name=name, features=frozenset(feats), source="iree-compile", compiler_version=version)


def _probe(exe: str, target_flags: tuple[str, ...]) -> HostCpu | None:
    """Ask the compiler: compile the probe module to executable sources and read its executable target."""
    try:
        version = iree_tools.compiler_version(exe, timeout_s=PROBE_TIMEOUT_S)
        with tempfile.TemporaryDirectory(prefix="boo-hostcpu-") as tmp:
            src = Path(tmp) / "probe.mlir"
            src.write_text(_PROBE_MLIR)
            proc = iree_tools.run_tool([exe, str(src), *target_flags, "--compile-to=executable-sources",
                                        "--mlir-disable-threading", "-o", "-"], PROBE_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError, BooError):
        return None
    parsed = parse_target_attribute(proc.stdout) if proc.returncode == 0 else None
    if parsed is None:
        return None
    name, features = parsed
    return HostCpu(name=name, features=features, source="iree-compile", compiler_version=version)
