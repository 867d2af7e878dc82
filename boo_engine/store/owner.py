"""Which process owns a run: recorded with the run (pid, host, the process's start time), so that a run left
`running` by a process that died (kill -9, a power cut) reads as interrupted instead of running for ever.

A run of another host keeps its status: its process cannot be looked at from here.
"""
from __future__ import annotations

import os
import socket
import sqlite3
from typing import TypedDict

from ..compile.procs import pid_alive, start_ticks


class RunOwner(TypedDict):
    """The owner columns of a run (schema m002): None where a run stored before them has none."""

    owner_pid: int | None
    owner_host: str | None
    owner_started: int | None     # /proc start time in clock ticks: tells a reused pid apart


def this_host() -> str:
    return socket.gethostname()


def owner_row() -> RunOwner:
    """This process, as the owner columns of a run."""
    pid = os.getpid()
    return {"owner_pid": pid, "owner_host": this_host(), "owner_started": start_ticks(pid)}


def owner_of(row: sqlite3.Row) -> RunOwner:
    """The owner columns of a row of runs."""
    return {"owner_pid": row["owner_pid"], "owner_host": row["owner_host"], "owner_started": row["owner_started"]}


def owner_alive(run: RunOwner) -> bool | None:
    """Whether the process that owns `run` (a row of runs) still runs: None when it cannot be told (no owner
    recorded, or another host)."""
    pid, host = run["owner_pid"], run["owner_host"]
    if not pid or host != this_host():
        return None
    alive = pid_alive(int(pid))
    if not alive:
        return alive
    started = run["owner_started"]
    return started is None or start_ticks(int(pid)) in (None, started)


def effective_status(status: str, owner: RunOwner) -> str:
    """A run's stored status as it stands: a `running` run whose owner died on this host is interrupted."""
    if status == "running" and owner_alive(owner) is False:
        return "interrupted"
    return status
