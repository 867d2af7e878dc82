"""A Ray cluster on this machine's loopback, for the tests and benchmarks of --ray: a head (and, to simulate
several machines, more nodes) started with `ray start`, no dashboard, in a temp folder of its own, so that
stopping it kills exactly its processes (`ray stop` would stop every Ray cluster of the user).
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ray_cli() -> str:
    """The `ray` command of this Python environment."""
    here = Path(sys.executable).with_name("ray")
    return str(here) if here.exists() else (shutil.which("ray") or "ray")


class LoopbackCluster:
    """`ray start --head` on 127.0.0.1 with `cpus` CPUs; `add_node(cpus)` joins another raylet (a simulated
    machine); `stop()` SIGKILLs every process started for it (found by its temp folder in their command line)."""

    def __init__(self, cpus: int = 2) -> None:
        # short: Ray's socket paths live under it and must stay under 108 bytes
        self.temp_dir = tempfile.mkdtemp(prefix="rb", dir="/tmp")
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self._env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
        self._run("--head", f"--port={self.port}", f"--num-cpus={cpus}", "--num-gpus=0",
                  "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={self.temp_dir}",
                  "--node-ip-address=127.0.0.1")

    def _run(self, *args: str) -> None:
        proc = subprocess.run([ray_cli(), "start", *args], env=self._env, capture_output=True, text=True,
                              timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"ray start failed: {proc.stderr.strip()[-2000:]}")

    def add_node(self, cpus: int = 1) -> None:
        self._run(f"--address={self.address}", f"--num-cpus={cpus}", "--num-gpus=0", "--disable-usage-stats",
                  "--node-ip-address=127.0.0.1")

    def pids(self) -> list[int]:
        """Every live process of this cluster: those whose command line names its temp folder, and all
        their descendants (Ray's workers and agents rename themselves `ray::...`)."""
        table: dict[int, tuple[int, str]] = {}
        for d in Path("/proc").iterdir():
            if not d.name.isdigit() or int(d.name) == os.getpid() or _zombie(d):
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
                table[int(d.name)] = (ppid, cmd)
        # (not by its address: a driver's command line names it too, and the driver is not the cluster's)
        ours = {pid for pid, (_, cmd) in table.items() if self.temp_dir in cmd and "ray" in cmd}
        grew = True
        while grew:
            more = {pid for pid, (ppid, _) in table.items() if ppid in ours and pid not in ours}
            ours |= more
            grew = bool(more)
        return sorted(ours)

    def stop(self, timeout_s: float = 20.0) -> None:
        """Kill the cluster's processes (the head going away, as a crashed machine would)."""
        deadline = time.monotonic() + timeout_s
        while (pids := self.pids()) and time.monotonic() < deadline:
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __enter__(self) -> LoopbackCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _zombie(d: Path) -> bool:
    with contextlib.suppress(OSError):
        for line in (d / "status").read_text().splitlines():
            if line.startswith("State:"):
                return "Z" in line.split()[1]
    return False
