"""What callers put on the store writer's queue (`Store` makes them, writer.py's thread takes them): frozen
items, the results among them coalesced per job (`coalesce`) and counted against MAX_PENDING (`weight`); a call's
answer comes back through its `reply` future."""
from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ..results import JobResult, RunStatus
from .rows import Row, result_from_bare

T = TypeVar("T")

#: results queued for the writer at most: a caller queueing more waits until the writer catches up (a caller with
#: 200,000 rows to store otherwise holds a snapshot of each in the queue: memory grows with the file, and a stop
#: waits for all of them to be written)
MAX_PENDING = 2000
#: results written in one transaction at most (consecutive ones of one drained batch, itself at most MAX_PENDING
#: items): each commit may checkpoint the WAL (an fsync), 500-result groups spent a third of the time committing
GROUP_MAX = MAX_PENDING


@dataclass(frozen=True)
class WriteResult:
    """Upsert the (snapshot of the) result; a later WriteResult of the same job in the same drain replaces it."""

    run_id: int
    result: JobResult


@dataclass(frozen=True)
class WriteNew:
    """Rows of jobs the run has none of yet (a start() storing a big file's queued jobs and bad lines, each
    `rows.bare_row`), after the commands they measure (text, op, func_name, signature): a few statements for all
    of them. A row the run has already turns them into what a RegisterCommand and a WriteResult each would write."""

    run_id: int
    commands: tuple[tuple[str, str | None, str | None, str | None], ...]   # the signature as its JSON text
    rows: tuple[tuple[Any, ...], ...]

    @property
    def items(self) -> list[WriteResult | RegisterCommand]:
        """The same writes, one item each."""
        return [*(RegisterCommand(*command) for command in self.commands),
                *(WriteResult(self.run_id, result_from_bare(row)) for row in self.rows)]


@dataclass(frozen=True)
class RegisterVariant:
    run_id: int
    name: str
    row: Row                            # rows.variant_row()


@dataclass(frozen=True)
class RegisterCommand:
    text: str
    op: str | None
    func_name: str | None
    signature: str | None   # its JSON text (made by the caller's thread: a dict held in the queue took 3x more)


@dataclass(frozen=True)
class FinishQueued:
    """Every row of the run still saying queued ends `status` with `error` (the jobs never left the queue)."""

    run_id: int
    status: str
    error: str
    finished_at: float


@dataclass(frozen=True)
class Flush:
    """Set `done` once everything queued before it is written."""

    done: threading.Event


@dataclass(frozen=True)
class Stop:
    """Write what is pending and end the thread."""


# Calls: the caller waits on `reply`, which gets the writer's return value or its exception.

@dataclass(frozen=True)
class StartRun:
    command_line: str
    target: str
    config: dict[str, Any]
    environment: dict[str, Any]
    reply: Future[int] = field(default_factory=Future, compare=False)   # the new run's id


@dataclass(frozen=True)
class FinishRun:
    run_id: int
    status: RunStatus
    reply: Future[None] = field(default_factory=Future, compare=False)


@dataclass(frozen=True)
class ResumeRun:
    run_id: int
    reply: Future[None] = field(default_factory=Future, compare=False)


@dataclass(frozen=True)
class MarkInterrupted:
    run_id: int
    reply: Future[int] = field(default_factory=Future, compare=False)   # the results marked


@dataclass(frozen=True)
class Execute(Generic[T]):
    """Run `fn(connection)` in one write transaction (tables the writer has no verb for: the tuner's); `reply`
    gets its value."""

    what: str
    fn: Callable[[sqlite3.Connection], T]
    reply: Future[T] = field(default_factory=Future, compare=False)


Call = StartRun | FinishRun | ResumeRun | MarkInterrupted | Execute
Item = WriteResult | WriteNew | RegisterVariant | RegisterCommand | FinishQueued | Flush | Stop | Call
#: the items that are rows: they count against MAX_PENDING, and consecutive ones are written in one transaction
ROWS = (WriteResult, RegisterCommand)


def weight(item: Item) -> int:
    """The rows an item holds: what it counts against MAX_PENDING."""
    if isinstance(item, ROWS):
        return 1
    if isinstance(item, WriteNew):
        return len(item.rows) + len(item.commands)
    return 0


def coalesce(batch: list[Item]) -> list[Item]:
    """`batch` with repeated WriteResults of one job collapsed to the last, at the last one's position; a
    collapse never crosses another item, so what was queued before a Flush, a call or a Stop is written before it.
    """
    out: list[Item] = []
    pending: dict[tuple[int, str], WriteResult] = {}
    for item in batch:
        if isinstance(item, WriteResult):
            key = (item.run_id, item.result.job_id)
            pending.pop(key, None)   # keep the LAST update, at its position
            pending[key] = item
        else:
            out.extend(pending.values())
            pending.clear()
            out.append(item)
    out.extend(pending.values())
    return out
