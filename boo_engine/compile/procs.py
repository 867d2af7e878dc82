"""Processes under /proc: a process's stat fields, its CPU time, its descendants; killing a process group or a
whole tree. Linux only; elsewhere the readers answer None / nothing and the kills signal what they can."""
from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import signal


def proc_stat(pid: int | str) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (field 3, the state, first), or None where /proc
    cannot tell (gone, not Linux). The name is cut at its LAST ')': it may itself contain spaces and ')'."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def pid_alive(pid: int) -> bool | None:
    """Whether a process of this pid exists (another user's counts); None when the system cannot tell."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    except (OSError, OverflowError):
        return None
    return True


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat): with the pid, it tells a
    process from an unrelated one that got the same pid later. None when unknown."""
    fields = proc_stat(pid)
    if not fields or len(fields) < 20 or not fields[19].isdigit():
        return None
    return int(fields[19])


def cpu_ticks(pid: int) -> int | None:
    """user + system CPU ticks of a process (all its threads), or None where /proc cannot tell."""
    fields = proc_stat(pid)
    if not fields or len(fields) < 13 or not (fields[11].isdigit() and fields[12].isdigit()):
        return None
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of the whole line)


def kill_group(pgid: int) -> None:
    """SIGKILL a process group; one that is gone (or not ours) is not an error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def descendants(pid: int) -> list[int]:
    """Every live process under `pid` (from /proc on Linux; empty where there is none)."""
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        fields = proc_stat(name)
        if fields and len(fields) > 1 and fields[1].isdigit():  # ppid: field 4 of the whole line
            children.setdefault(int(fields[1]), []).append(int(name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def kill_tree(pid: int) -> None:
    """SIGKILL `pid`, everything under it and their process groups (a compiler's linker child included).
    The caller's own group is never signalled: a worker killed before it left it is still in it."""
    procs = [pid, *descendants(pid)]
    groups = set()
    for p in procs:
        with contextlib.suppress(OSError):
            groups.add(os.getpgid(p))
    groups.discard(os.getpgrp())
    for g in groups:
        kill_group(g)
    for p in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, signal.SIGKILL)


@functools.cache
def host_tag() -> str:
    import socket

    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def owner_tag() -> str:
    """`PID-HOST` for a cache's staging or trash folder's name: who made it, so its leftovers can be swept safely."""
    return f"{os.getpid()}-{host_tag()}"


def owner_pid(name: str) -> int | None:
    """The pid in a `.tmp-KEY-PID-HOST-XXXX` / `.trash-KEY-PID-HOST-XXXX` folder made on THIS host; None for
    anything else (other hosts' folders, entries)."""
    parts = name.split("-")
    if len(parts) < 5 or parts[0] not in (".tmp", ".trash") or not parts[2].isdigit() or parts[3] != host_tag():
        return None
    return int(parts[2])


def maybe_alive(pid: int) -> bool:
    """False only when the process is known gone: unknown counts as alive, never sweep what may be in use."""
    return pid_alive(pid) is not False
