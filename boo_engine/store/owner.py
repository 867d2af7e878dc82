"""Which process owns a run: recorded with the run (pid, host, the process's start time), so that a run left
`running` by a process that died (kill -9, a power cut) reads as interrupted instead of running for ever.

A run of another host keeps its status: its process cannot be looked at from here.
"""
from __future__ import annotations

import os
import socket
from typing import Any


def this_host() -> str:
    return socket.gethostname()


def process_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22): with the pid, it tells a
    live owner from an unrelated process that got the same pid later. None when unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return int(stat[stat.rindex(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def owner_row() -> dict[str, Any]:
    """This process, as the owner columns of a run."""
    pid = os.getpid()
    return {"owner_pid": pid, "owner_host": this_host(), "owner_started": process_start(pid)}


def owner_alive(run: dict[str, Any]) -> bool | None:
    """Whether the process that owns `run` (a row of runs) still runs: None when it cannot be told (no owner
    recorded, or another host)."""
    pid, host = run.get("owner_pid"), run.get("owner_host")
    if not pid or host != this_host():
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's
    except OSError:
        return None
    started = run.get("owner_started")
    return started is None or process_start(int(pid)) in (None, started)


def effective_status(run: dict[str, Any]) -> str:
    """The run's status as it stands: a `running` run whose owner died on this host is interrupted."""
    status = str(run.get("status"))
    if status == "running" and owner_alive(run) is False:
        return "interrupted"
    return status
