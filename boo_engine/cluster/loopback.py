"""A Ray cluster on this machine's loopback, for the tests and benchmarks of --ray: a head (and, to simulate
several machines, more nodes) started with `ray start`, no dashboard, in a temp folder of its own, so that
stopping it kills exactly its processes (`ray stop` would stop every Ray cluster of the user). Every process of
a one-node cluster listens on loopback only (Ray's LOOPBACK_SWITCH off: without it, `--node-ip-address=127.0.0.1`
is replaced by the machine's address and they listen on every interface). Ray refuses a second node with the
switch off, so a cluster of several nodes (`loopback=False`) listens on every interface, as a real one does.
With Ray's client installed, the head runs a client server on a port of its own (`client_address`, ray://...),
not on Ray's default 10001 that two clusters would share.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import LOOPBACK_SWITCH


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
    machine: only with loopback=False); `stop()` SIGKILLs every process started for it (found by its temp folder
    in their command line)."""

    def __init__(self, cpus: int = 2, *, loopback: bool = True) -> None:
        # short: Ray's socket paths live under it and must stay under 108 bytes
        self.temp_dir = tempfile.mkdtemp(prefix="rb", dir="/tmp")
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.loopback = loopback
        self._env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", **{LOOPBACK_SWITCH: "0" if loopback else "1"})
        # the client server gives a ray:// client's own server (a Ray driver it starts) 30 s to answer by default;
        # a loaded 2-core machine may take longer (a ray:// run failed once under load with "Initialization
        # failure from server", its reason not kept): this is a hang guard instead
        self._env.setdefault("RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S", "300")
        client = importlib.util.find_spec("grpc") is not None
        self.client_port = _free_port() if client else None
        self._run("--head", f"--port={self.port}", f"--num-cpus={cpus}", "--num-gpus=0",
                  "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={self.temp_dir}",
                  "--node-ip-address=127.0.0.1", *([f"--ray-client-server-port={self.client_port}"] if client else []))

    @property
    def client_address(self) -> str | None:
        """ray://... of the head's client server; None without Ray's client."""
        return f"ray://127.0.0.1:{self.client_port}" if self.client_port else None

    def _run(self, *args: str) -> None:
        proc = subprocess.run([ray_cli(), "start", *args], env=self._env, capture_output=True, text=True,
                              timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"ray start failed: {proc.stderr.strip()[-2000:]}")

    def add_node(self, cpus: int = 1) -> None:
        if self.loopback:
            raise RuntimeError("Ray refuses a second node on loopback: start the cluster with loopback=False")
        self._run(f"--address={self.address}", f"--num-cpus={cpus}", "--num-gpus=0", "--disable-usage-stats",
                  "--node-ip-address=127.0.0.1")

    def pids(self) -> list[int]:
        """Every live process of this cluster: those whose command line names its temp folder or its client
        server's port, and all their descendants (Ray's workers and agents rename themselves `ray::...`)."""
        table: dict[int, tuple[int, str]] = {}
        for d in Path("/proc").iterdir():
            if not d.name.isdigit() or int(d.name) == os.getpid() or _zombie(d):
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
                table[int(d.name)] = (ppid, cmd)
        # (not by its address: a driver's command line names it too, and the driver is not the cluster's)
        client = f" --port={self.client_port} " if self.client_port else None
        ours = {pid for pid, (_, cmd) in table.items() if (self.temp_dir in cmd and "ray" in cmd) or (
            client and "ray.util.client.server" in cmd and client in f"{cmd} ")}
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
