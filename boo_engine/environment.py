"""Where a number was measured: host, CPU, GPU, compiler and library versions.

A latency means nothing without the machine and the compiler that produced it, so every run records this next
to its results (deduplicated by the store). Collecting it must never slow a run or break it: every probe is
cheap, has a short timeout, and degrades to None; external tool probes are cached for the process.
"""
from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from typing import Any, TypedDict, TypeVar

from . import iree_tools
from .cpu_defaults.machine import host_cpu

PROBE_TIMEOUT_S = 2.0
T = TypeVar("T")


class GpuInfo(TypedDict):
    """The first GPU (`gpu_info`): its name, architecture (sm_90, gfx942), driver version and how many there are."""

    name: str | None
    arch: str | None
    driver: str | None
    count: int


def collect_environment(target_name: str, *, compiler_version: str | None = None,
                        per_op_defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """A JSON-able description of this machine and toolchain for a run on `target_name`. Never raises.

    `compiler_version`: the `iree-compile --version` text when the caller already has it (the kernel cache
    remembers it per compiler build), saving a ~0.3 s subprocess. `per_op_defaults`: where the baselines' per-op
    flags came from (`cpu_defaults.machine.defaults_in_use`), recorded as given.

    `cpu` is the model name /proc/cpuinfo gives ("AMD EPYC" on a Zen 3 and a Zen 5 alike); `cpu_name` and
    `cpu_features` are what the compiler resolved for `host` (LLVM's name, e.g. znver3, and the key features:
    hostcpu.KEY_FEATURES present), which is what the kernels were built for."""
    env: dict[str, Any] = {"target": target_name}
    known_version = _version_line(compiler_version) if compiler_version else None
    for key, probe in (
        ("host", socket.gethostname),
        ("os", _os_name),
        ("python", platform.python_version),
        ("cpu", _cpu_model),
        ("cpu_name", lambda: host_cpu().name),
        ("cpu_features", lambda: host_cpu().key_features),
        ("cores_logical", os.cpu_count),
        ("cores_physical", _physical_cores),
        ("cores_available", _available_cores),
        ("memory_gb", _memory_gb),
        ("iree_compile_version", (lambda: known_version) if known_version else _iree_compile_version),
        ("iree_runtime_version", lambda: _dist_version("iree-base-runtime")),
        ("torch_version", _torch_version),
        ("torch_threads", _torch_threads),
        ("tool_version", _tool_version),
    ):
        env[key] = _safe(probe)
    if per_op_defaults is not None:
        env["per_op_defaults"] = per_op_defaults
    gpu = _safe(_gpu_info)
    env["gpu"] = gpu["name"] if gpu else None
    env["gpu_arch"] = gpu["arch"] if gpu else None
    env["driver"] = gpu["driver"] if gpu else None
    env["gpu_count"] = gpu["count"] if gpu else None
    return env


def _safe(probe: Callable[[], T]) -> T | None:
    try:
        return probe()
    except Exception:  # noqa: BLE001 (a probe is best effort by design: a missing fact is None, never a failed run)
        return None


def _os_name() -> str:
    return f"{platform.system()} {platform.release()}"


@functools.cache
def _cpuinfo() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _cpu_model() -> str | None:
    for line in _cpuinfo().splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "Hardware") and value.strip():
            return value.strip()
    return platform.processor() or platform.machine() or None


def _physical_cores() -> int | None:
    """Distinct (physical id, core id) pairs; None where /proc/cpuinfo does not tell (some VMs, non-Linux)."""
    cores: set[tuple[str, str]] = set()
    phys = core = None
    for line in _cpuinfo().splitlines() + [""]:
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "physical id":
            phys = value.strip()
        elif key == "core id":
            core = value.strip()
        elif not key:
            if core is not None:
                cores.add((phys or "0", core))
            phys = core = None
    return len(cores) or None


def _available_cores() -> int | None:
    """Cores this process may run on (taskset / cgroup cpusets make this smaller than the machine)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def _memory_gb() -> float | None:
    with open("/proc/meminfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    return None


def _run(cmd: list[str]) -> str | None:
    """stdout of a tool if it is on PATH and answers in time, else None."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        # its own session, so a timeout kills the tool AND anything it started (a grandchild holding the pipe
        # open would otherwise keep us waiting for it)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                text=True, start_new_session=True)
    except OSError:
        return None
    try:
        out, _ = proc.communicate(timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.communicate()
        return None
    return out if proc.returncode == 0 else None


@functools.cache
def _iree_compile_version() -> str | None:
    """The version of the iree-compile that compiles the kernels: the installed iree-base-compiler wheel's (an
    iree-compile on PATH may be another build), as the kernel cache keys on it (iree_tools.compiler_version)."""
    exe = iree_tools.find_tool("iree-compile")
    return _version_line(iree_tools.compiler_version(exe, timeout_s=PROBE_TIMEOUT_S)) if exe else None


def _version_line(out: str) -> str | None:
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    for ln in lines:
        if "version" in ln.lower():
            return ln
    return lines[0] if lines else None


def _dist_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _torch_version() -> str | None:
    torch = sys.modules.get("torch")
    if torch is not None:
        return str(torch.__version__)
    return _dist_version("torch")   # importing torch just to ask would cost seconds


def _torch_threads() -> int | None:
    """Only when torch is already imported: importing it here would cost seconds, and the thread count that
    matters is the one the measuring process set."""
    torch = sys.modules.get("torch")
    return int(torch.get_num_threads()) if torch is not None else None


def _tool_version() -> str:
    from . import __version__

    return __version__


def gpu_info() -> GpuInfo | None:
    """The first GPU: {"name", "arch", "driver", "count"} from nvidia-smi or rocminfo (asked once per process);
    None without one."""
    return _safe(_gpu_info)


@functools.cache
def _gpu_info() -> GpuInfo | None:
    return _nvidia_gpu() or _amd_gpu()


def _nvidia_gpu() -> GpuInfo | None:
    out = _run(["nvidia-smi", "--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader"])
    if not out:
        return None
    rows = [[c.strip() for c in ln.split(",")] for ln in out.splitlines() if ln.strip()]
    if not rows:
        return None
    name, driver, cap = (rows[0] + [None, None, None])[:3]
    arch = f"sm_{cap.replace('.', '')}" if cap else None
    return GpuInfo(name=name, driver=driver, arch=arch, count=len(rows))


def _amd_gpu() -> GpuInfo | None:
    out = _run(["rocminfo"])
    if not out:
        return None
    names, archs = [], []
    for block in out.split("*******"):
        if "Device Type:" in block and "GPU" in block.split("Device Type:", 1)[1].splitlines()[0]:
            fields: dict[str, str] = {}
            for line in block.splitlines():
                k, _, val = line.partition(":")
                fields.setdefault(k.strip(), val.strip())
            archs.append(fields.get("Name"))
            names.append(fields.get("Marketing Name") or fields.get("Name"))
    if not archs:
        return None
    return GpuInfo(name=names[0], arch=archs[0], driver=_amd_driver(), count=len(archs))


def _amd_driver() -> str | None:
    try:
        with open("/sys/module/amdgpu/version", encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError:
        return None


# ---- one-line labels of a recorded environment (Markdown header, dashboard) ----------------------------------

def machine_label(env: dict[str, Any]) -> str | None:
    """`host (AMD EPYC, znver3: avx2 fma f16c, 2 cores), GPU`: the machine of a recorded environment, with the CPU
    the compiler resolved (the model name alone can read the same on different CPUs). None without a host."""
    if not env.get("host"):
        return None
    machine = str(env["host"])
    cpu = [str(env["cpu"])] if env.get("cpu") else []
    if env.get("cpu_name"):
        feats = " ".join(str(f) for f in env.get("cpu_features") or [])
        cpu.append(f"{env['cpu_name']}: {feats}" if feats else str(env["cpu_name"]))
    cores = env.get("cores_logical") or env.get("cores")
    if cpu:
        machine += f" ({', '.join(cpu)}" + (f", {cores} cores)" if cores else ")")
    if env.get("gpu"):
        machine += f", {env['gpu']}"
    return machine


def defaults_label(env: dict[str, Any]) -> str | None:
    """Where the baselines' per-op-class flags came from, in a few words: `per-op defaults: table NAME (digest D)`,
    `... : rules`, `IREE's plain defaults`; None when not recorded or not applicable (GPU targets)."""
    d = env.get("per_op_defaults")
    if not isinstance(d, dict) or d.get("source") in (None, "none"):
        return None
    if d["source"] == "off":
        return "IREE's plain defaults (no per-op flags)"
    if d["source"] == "table":
        name = os.path.basename(str(d.get("path") or "")) or "table"
        return f"per-op defaults: {name} (digest {d.get('digest')}; rules for other classes)"
    return "per-op defaults: built-in rules"
