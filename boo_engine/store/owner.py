"""Which process owns a run: recorded with the run (pid, host, the process's start time), so that a run left
`running` by a process that died (kill -9, a power cut) reads as interrupted instead of running for ever.

A run of another host keeps its status: its process cannot be looked at from here.
"""
from __future__ import annotations

import os
import socket
from typing import Any

from ..compile.procs import pid_alive, start_ticks


def this_host() -> str:
    return socket.gethostname()


def owner_row() -> dict[str, Any]:
    """This process, as the owner columns of a run."""
    pid = os.getpid()
    return {"owner_pid": pid, "owner_host": this_host(), "owner_started": start_ticks(pid)}


def owner_alive(run: dict[str, Any]) -> bool | None:
    """Whether the process that owns `run` (a row of runs) still runs: None when it cannot be told (no owner
    recorded, or another host)."""
    pid, host = run.get("owner_pid"), run.get("owner_host")
    if not pid or host != this_host():
        return None
    alive = pid_alive(int(pid))
    if not alive:
        return alive
    started = run.get("owner_started")
    return started is None or start_ticks(int(pid)) in (None, started)


def effective_status(run: dict[str, Any]) -> str:
    """The run's status as it stands: a `running` run whose owner died on this host is interrupted."""
    status = str(run.get("status"))
    if status == "running" and owner_alive(run) is False:
        return "interrupted"
    return status
