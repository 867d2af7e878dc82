"""Which devices a run measures on, and how a benchmark worker is held to one.

A device is named as results record it: "cpu" (this host), "cuda:N", "hip:N", N counting the GPUs this process
sees (after a CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES it was started with). `--devices` takes "0,1", "0-3",
"all" (`parse_devices`); the cpu target has one device, "cpu".

A worker measures on ONE device: its child process is started with the kind's *_VISIBLE_DEVICES naming only that
GPU (`device_env`), set in the child before torch or IREE is imported (`device_child_main`), so IREE's device 0
and torch's "cuda" are that GPU. The parent's own environment is never changed.

Imports nothing heavy: the spawned child imports this module first.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection

from ..errors import BooError

#: the environment variable that limits which GPUs a process (IREE's HIP/CUDA runtime and torch alike) sees.
#: ROCm's lower-level ROCR_VISIBLE_DEVICES is left as the caller set it: HIP_VISIBLE_DEVICES indexes the GPUs
#: it leaves, as the ids of `--devices` do.
VISIBLE_DEVICES = {"hip": "HIP_VISIBLE_DEVICES", "cuda": "CUDA_VISIBLE_DEVICES"}
CPU = "cpu"


class DeviceError(BooError):
    """A device list that cannot be used here: one line naming what is wrong (a usage error, exit 2).
    `detail`: the line without the option and list it is about."""

    def __init__(self, where: str, detail: str) -> None:
        super().__init__(f"{where}: {detail}")
        self.detail = detail


def default_devices(kind: str) -> tuple[str, ...]:
    """The one device a run measures on without --devices: the CPU, or the first GPU of the target's kind."""
    return (CPU,) if kind == CPU else (f"{kind}:0",)


def parse_devices(text: str, kind: str, count: int | Callable[[], int] | None = None, *,
                  option: str = "--devices") -> tuple[str, ...]:
    """`--devices TEXT` for a target of `kind` ("cpu", "hip", "cuda") as device names, in the order given.

    GPUs: comma-separated ids and ranges ("0,1", "0-3", "0,2-3") or "all". `count`: how many GPUs of `kind`
    there are (a callable is asked only when needed; None: `targets.gpu_device_count`). The cpu target has one
    device: "cpu", "all" and "0" name it. Raises DeviceError with one line naming the problem: an empty list or
    item, a non-number, a negative id, a reversed range, an id listed twice, an id this machine lacks."""
    shown = text if len(text) <= 60 else text[:57] + "..."
    where = f"{option} {shown!r}"
    items = [item.strip() for item in text.split(",")]
    if not text.strip():
        raise DeviceError(option, "empty device list (give GPU ids such as 0,1 or 0-3, or all)")
    if kind == CPU:
        return _cpu_devices(items, where)
    if "" in items:
        raise DeviceError(where, "an empty item in the list (ids are separated by single commas)")
    ids, wants_all = _listed_ids(items, where)
    n = _count(kind, count)
    if n == 0:
        raise DeviceError(where, f"this machine has no {kind} GPU")
    if wants_all:
        ids = list(range(n))
    missing = [i for i in ids if i >= n]
    if missing:
        raise DeviceError(where, f"this machine has no {kind} GPU {missing[0]} "
                          f"({n} {kind} GPU{'s' if n != 1 else ''}, ids 0 to {n - 1})")
    return tuple(f"{kind}:{i}" for i in ids)


def _cpu_devices(items: list[str], where: str) -> tuple[str, ...]:
    """The cpu target's one device, which "cpu", "all" and "0" name."""
    if len(items) == 1 and items[0].lower() in (CPU, "all", "0"):
        return (CPU,)
    raise DeviceError(where, "the cpu target measures on one device, this host's CPU (give --devices cpu "
                      "or leave it out; GPU ids need --target hip:ARCH or cuda:ARCH)")


def _listed_ids(items: list[str], where: str) -> tuple[list[int], bool]:
    """The GPU ids the items list, each once, and whether the list is "all" (then no ids)."""
    ids: list[int] = []
    wants_all = False
    for item in items:
        if item.lower() == "all":
            if len(items) > 1:
                raise DeviceError(where, "'all' cannot be combined with other ids")
            wants_all = True
            continue
        ids += _parse_item(item, where)
    seen: set[int] = set()
    for i in ids:
        if i in seen:
            raise DeviceError(where, f"GPU {i} is listed twice")
        seen.add(i)
    return ids, wants_all


def _parse_item(item: str, where: str) -> list[int]:
    """One item: "3" or "0-3"."""
    if item.startswith("-"):
        raise DeviceError(where, f"{item!r} is negative (GPU ids count from 0)")
    low, sep, high = item.partition("-")
    try:
        a = int(low)
        b = int(high) if sep else a
    except ValueError:
        raise DeviceError(where, f"{item[:20]!r} is not a GPU id (expected ids such as 0,1, a range 0-3, "
                          "or all)") from None
    if b < a:
        raise DeviceError(where, f"the range {item!r} runs backwards (write {b}-{a})")
    return list(range(a, b + 1))


def _count(kind: str, count: int | Callable[[], int] | None) -> int:
    if count is None:
        from ..targets import gpu_device_count

        return gpu_device_count(kind)
    return count() if callable(count) else int(count)


def device_index(device: str) -> int | None:
    """The GPU id of "cuda:1" (1); None for the cpu."""
    kind, _, index = device.partition(":")
    return int(index) if kind != CPU and index.isdigit() else None


def device_env(device: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a worker's child measuring on `device` is started with, beyond the parent's own: the
    kind's *_VISIBLE_DEVICES naming that one GPU. An id counts the GPUs the parent sees: when the parent was
    itself started with a list (CUDA_VISIBLE_DEVICES=2,3), "cuda:1" is its second entry (3). {} for the cpu."""
    kind = device.partition(":")[0]
    index = device_index(device)
    if kind not in VISIBLE_DEVICES or index is None:
        return {}
    var = VISIBLE_DEVICES[kind]
    env = os.environ if environ is None else environ
    visible = [v.strip() for v in env.get(var, "").split(",") if v.strip()]
    return {var: visible[index] if index < len(visible) else str(index)}


def device_child_main(env: Mapping[str, str], main: Callable[[Connection, Connection, int], None],
                      inbox: Connection, outbox: Connection, threads: int) -> None:
    """A worker's child process entry: its device's environment first (before torch or IREE exists in this
    process), then the child's loop `main` (`child._child_main`)."""
    os.environ.update(env)
    main(inbox, outbox, threads)
