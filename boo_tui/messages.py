"""Every message the dashboard's threads send to the UI thread: small typed dataclasses, one per kind of news.

Engine events come through `EventsReady` (see `bridge.EventBridge`); what a call on the engine
thread (`EngineClient.call`) returns comes back as the message its caller asked for (`JobsAdded`,
`ExportWritten`, ...), or as `EngineFailed`. Screens' thread workers hand results back with `Deferred`.
Posting a message never blocks the thread that posts it.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from textual.message import Message

from boo_engine.api import Comparison, JobResult, ModelLine

if TYPE_CHECKING:
    from boo_engine.api import (
        Session,  # imported by the engine client, when the session opens
        TuneEvent,
    )


class EventsReady(Message):
    """Session events are waiting in the bridge's buffer, in the order the engine emitted them (one poke at a
    time: the bridge posts the next only once the UI has taken every event)."""


@dataclass
class Deferred(Message, bubble=False):
    """Run `callback(*args)` on the UI thread: how screens' thread workers hand results back without blocking.

    It does not bubble: a screen's Deferred is handled by that screen only, never run a second time by the app."""

    callback: Callable[..., object]    # (what it returns is dropped)
    args: tuple[object, ...] = ()


@dataclass
class SessionOpened(Message):
    """The session exists; `added` are the jobs of the inputs it was given, `errors` the inputs it refused;
    `hold`: the run must not start by itself (a variants file names a kernel the run does not have)."""

    session: Session
    added: list[JobResult] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    hold: bool = False


@dataclass
class SessionFailed(Message):
    """No session: a bad target, an unusable results database... (one line)."""

    reason: str


@dataclass
class EngineFailed(Message):
    """A call on the engine thread raised: the one-line message for the user."""

    reason: str


@dataclass
class JobsAdded(Message):
    """Jobs a command, a commands file or a variant added (bad input lines are failed jobs among them)."""

    results: list[JobResult]


@dataclass
class ExportWritten(Message):
    """The session wrote an export file."""

    path: str


@dataclass
class ComparisonsComputed(Message):
    """The engine's verdicts for commands it sent no `ComparisonsUpdated` for (a job re-run on its own, a variant
    added after its baseline ran): {(target, command, column label): Comparison}, computed by
    `Session.comparisons` with the run's --min-effect and seed. `generations`: the state of each command they
    were asked for (a later change makes them stale)."""

    comparisons: dict[tuple[str, str, str], Comparison]
    generations: dict[tuple[str, str], int]


@dataclass
class ModelLinesComputed(Message):
    """The engine's model lines (`Session.model_lines`: per column, sum of calls x median of the weighted commands
    and its verdict against the baseline) for the results the dashboard had when it asked."""

    lines: list[ModelLine]
    error: str | None = None   # why they could not be computed (shown in the bar instead)


@dataclass
class TuneEventPosted(Message, bubble=False):
    """One event of the tuner (`boo_engine.tune.events`: TuneUpdate, KernelTuned, TuneLog), in order, for the tune
    screen. Sample batches of the tuner's session do not come this way: the screen reads them at most
    plots.MAX_HZ times a second (`TuneRun.take_changed`)."""

    event: TuneEvent


@dataclass
class TuneFinished(Message, bubble=False):
    """The tune's thread ended: the files it wrote (none when it stopped or failed), the tune's id in the results
    database, and the one-line error when it failed."""

    paths: list[str]
    tune_id: int | None
    db_path: str
    stopped: bool = False
    error: str | None = None


@dataclass(frozen=True)
class TuneRequest:
    """What the tune dialog accepted: candidates per kernel, the output folder and which commands."""

    budget: int
    out_dir: str
    scope: str               # "selected" (the command under the cursor) | "shown" (every command the table shows)


@dataclass
class TuneGate(Message):
    """The engine thread's answer before a tune starts: whether the dashboard's own session was idle (one
    measurement at a time on the machine)."""

    idle: bool
    request: TuneRequest
    inputs: list[str]
