"""What a session will run: input entries expanded into jobs.

Owns the vocabulary of *what* is asked, with no threads, no store and no events, so it can be read (and tested)
alone:
- `InputEntry`: one input as the user gave it (a command string, or one line of a commands file, good or bad);
- `PlannedJob`: what the runner needs about a job beyond its public `JobResult` record;
- `job_id()`: the stable id of a job. `--resume` finds a run's finished jobs by these ids, so the formula must
  never change (sha1 of text, variant, backend and target);
- `Plan`: entries x variants x backends -> jobs, keyed by id.

`Plan` is not thread-safe: the session calls it under its state lock (see state.py).
"""
from __future__ import annotations

import array
import bisect
import hashlib
from collections.abc import Collection, Container, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..commands import Command, CommandLine
from ..results import FAILED, FINAL_STATUSES, IREE, NO_BACKEND, NO_VARIANT, QUEUED, TORCH, Backend, JobResult
from ..variants import BASELINE, Variant

if TYPE_CHECKING:  # the pool module starts processes; the plan only names its type
    from ..compile.pool import Artifact

#: the measurement goal of a command that gives no --iter and runs under no session-wide --iter
DEFAULT_ITERS = 100
#: kernel names of commands remembered at most (then forgotten all at once)
FUNC_NAMES_KEPT = 4096
#: distinct first words of bad lines shared at most (a file of garbage has a new one on every line)
OPS_KEPT = 1024


@dataclass(frozen=True, slots=True)
class InputEntry:
    """One input as the user gave it. `command` is None when it did not parse; `error` then says why (naming
    file:line for a commands file). `text` is what its jobs are named and identified by."""

    source: str | None                # "path:LINE" for a line of a commands file, else None
    text: str
    command: Command | None
    error: str | None = None
    calls: int | None = None          # its weight in the model (a `# boo-tui:` line), kept by a bad line too
    share: float | None = None
    captured_us: float | None = None

    @classmethod
    def from_line(cls, line: CommandLine) -> InputEntry:
        """A line of a commands file (read with errors="collect"), parsed or not."""
        return cls(source=line.source, text=line.text, command=line.command, error=line.message, calls=line.calls,
                   share=line.share, captured_us=line.captured_us)

    @classmethod
    def from_command(cls, command: Command, source: str | None = None) -> InputEntry:
        return cls(source=source, text=command.text, command=command, calls=command.calls, share=command.share,
                   captured_us=command.captured_us)


@dataclass(slots=True)
class PlannedJob:
    """What the runner needs about a job beyond its public JobResult record. The stages fill in the mutable
    fields as the job moves on (the session's state lock guards them)."""

    command: Command | None           # None for a bad input line: a FAILED job that never runs
    variant: Variant
    backend: Backend | None           # None for a bad input line
    iters: int                        # the measurement goal
    min_time_s: float | None = None   # measure at least this long (None: the session's --min-time)
    artifact: Artifact | None = None  # once compiled (or found in the cache)
    future: Future[Artifact] | None = None   # the compile in flight
    outputs_path: str | None = None   # a baseline's saved outputs, to check its variants' numerics against
    cancelled: bool = False
    # other processes' CPU over this job's measuring rounds: sum of host_load * wall_s, and sum of wall_s
    load_cpu_s: float = 0.0
    load_wall_s: float = 0.0
    steal_cpu_s: float = 0.0          # the hypervisor's steal over the same rounds: sum of steal * wall_s
    #: its row in the store: None (never asked for), True (recorded: stored, or queued for the store's writer),
    #: False (a start() stopped by interrupt() before it got to this job: the run never had it)
    stored: bool | None = None

    @property
    def is_iree_baseline(self) -> bool:
        """The job a command's variants are compared (and numerics-checked) against."""
        return self.backend == IREE and self.variant.is_baseline

    def prepare(self, iters: int | None, min_time_s: float | None) -> None:
        """About to be queued: not cancelled any more, and this measurement's goal when one is given."""
        self.cancelled = False
        if iters is not None:
            self.iters = max(1, int(iters))
        if min_time_s is not None:
            self.min_time_s = float(min_time_s)

    def reset(self) -> None:
        """Forget what a previous measurement left (a rerun); the artifact stays, it is still valid."""
        self.cancelled = False
        self.load_cpu_s = self.load_wall_s = self.steal_cpu_s = 0.0


class IdSet:
    """A set of 48-bit ints (jobs' ids) in 8 bytes each: a sorted array, and a set of the newest merged into it
    in bulk (a Python set of ints took ~70 bytes each: 28 MiB for 400,000 jobs). A 2 MiB bitmap of their low 24
    bits answers most lookups of an id not in it (each job's new id is one) without a search."""

    MERGE_AT = 32768
    _BITS = 24

    def __init__(self) -> None:
        self._sorted = array.array("q")
        self._new: set[int] = set()
        self._seen = bytearray(1 << (self._BITS - 3))

    def add(self, value: int) -> None:
        """(A value added again after its merge is kept twice: the caller adds each once.)"""
        low = value & ((1 << self._BITS) - 1)
        self._seen[low >> 3] |= 1 << (low & 7)
        self._new.add(value)
        if len(self._new) >= self.MERGE_AT:
            merged = self._sorted.tolist() + sorted(self._new)
            merged.sort()   # (two sorted runs: timsort merges them in one pass)
            self._sorted = array.array("q", merged)
            self._new.clear()

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, int):
            return False
        low = value & ((1 << self._BITS) - 1)
        if not self._seen[low >> 3] & (1 << (low & 7)):
            return False
        if value in self._new:
            return True
        i = bisect.bisect_left(self._sorted, value)
        return i < len(self._sorted) and self._sorted[i] == value

    def __len__(self) -> int:
        return len(self._sorted) + len(self._new)


def job_id(text: str, variant: str, backend: str, target: str, taken: Container[str] = ()) -> str:
    """The id of the job measuring `text` as `variant` on `backend` for `target`: stable across processes and
    runs (`--resume` relies on it). A second job with the same four (the same command given twice) gets a
    `-2`, `-3`... suffix, in the order they were added."""
    base = hashlib.sha1(f"{text}\0{variant}\0{backend}\0{target}".encode()).hexdigest()[:12]
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def applies(variant: Variant, command: Command, func_name: str | None = None) -> bool:
    """Edited-dispatch variants are made for one kernel (every kernel's dispatches share names, so an edited
    dispatch would be substituted into unrelated kernels): they get no job for other commands. `func_name`: the
    command's, when the caller has it."""
    return variant.applies_to(command.signature.func_name if func_name is None else func_name)


def expand(command: Command, variants: Iterable[Variant], backends: Collection[str],
           func_name: str | None = None) -> list[tuple[Variant, Backend]]:
    """The (variant, backend) pairs one command is measured as, in queue order: every variant that applies to
    it on IREE, then the torch reference (which has no variants: it is the same eager code whatever the
    compiler flags)."""
    pairs: list[tuple[Variant, Backend]] = []
    if IREE in backends:
        pairs += [(variant, IREE) for variant in variants if applies(variant, command, func_name)]
    if TORCH in backends:
        pairs.append((BASELINE, TORCH))
    return pairs


class Plan:
    """Every entry given to the session and the jobs made of them: `jobs` (the public records, in queue order)
    and `planned` (the runner's side of each), both keyed by job id."""

    def __init__(self, target: str, backends: Collection[str], iters: int | None = None) -> None:
        """`target`: the target's name (part of every job id). `iters`: a session-wide goal overriding each
        command's own --iter."""
        self.target = target
        self.backends = backends
        self.iters = iters
        self.entries: list[InputEntry] = []   # the good ones (a variant added later gets a job for each)
        self.jobs: dict[str, JobResult] = {}
        self.planned: dict[str, PlannedJob] = {}
        #: finished results of the run being resumed, by job id: a job with such an id is not measured again
        self.resumed: Mapping[str, JobResult] = {}
        #: a job id given more than once (the same line repeated) -> the last suffix it got: the next copy's id
        #: is found in one step, not by trying -2, -3, ... (200,000 copies of one line would take hours)
        self._copies: dict[str, int] = {}
        self._func_names: dict[int, tuple[Command, str]] = {}   # id(command) -> (command, its func_name)
        self._ops: dict[str, str] = {}   # the first word of bad lines: 200,000 of them held ~50 bytes each
        #: jobs dropped from memory with a final status (`forget`: a spooled run's, stored first), by status
        self.retired: dict[str, int] = {}
        #: the ids of jobs dropped from memory, as the int of their 12 hex digits (a copy's suffix is in _copies):
        #: a line given again still gets an id of its own. 8 bytes a job: what a spooled run keeps of each
        self._taken = IdSet()

    def add_entry(self, entry: InputEntry, variants: Iterable[Variant],
                  func_name: str | None = None) -> list[JobResult]:
        """The jobs of one entry: its (variant, backend) pairs, or one FAILED job for a bad entry. `func_name`: its
        command's kernel name, when the caller knows it (a big file's reader worked it out)."""
        if entry.command is None:
            return [self._add_failed(entry)]
        self.entries.append(entry)
        name = func_name or self._func_name(entry.command)
        return [self._add(entry, entry.command, variant, backend, name)
                for variant, backend in expand(entry.command, variants, self.backends, name)]

    def add_variant(self, variant: Variant) -> list[JobResult]:
        """The jobs a variant added mid-session gets: one per good entry so far it applies to (IREE only)."""
        if IREE not in self.backends:
            return []
        added = []
        for entry in self.entries:
            if entry.command is not None:
                name = self._func_name(entry.command)
                if applies(variant, entry.command, name):
                    added.append(self._add(entry, entry.command, variant, IREE, name))
        return added

    def requeue(self, job_id: str) -> JobResult:
        """Reset a finished job to QUEUED for a rerun (its compile info and artifact stay)."""
        result = self.jobs[job_id]
        result.clear_measurement()
        result.status = QUEUED
        self.planned[job_id].reset()
        return result

    def skipped(self, job_ids: Iterable[str]) -> None:
        """A start() stopped before it got to these jobs: the ones it had never stored have no row, ever."""
        for job_id in job_ids:
            job = self.planned.get(job_id)
            if job is not None and job.stored is None:
                job.stored = False

    def cancel(self, job_ids: Iterable[str]) -> None:
        """Mark jobs cancelled and cancel their compiles not yet started (the caller holds the state lock)."""
        for job_id in job_ids:
            job = self.planned[job_id]
            job.cancelled = True
            if job.future is not None:
                job.future.cancel()

    @property
    def total(self) -> int:
        """Jobs held, and dropped with a final status."""
        return len(self.jobs) + sum(self.retired.values())

    def forget(self, job_ids: Iterable[str], *, taken: bool = False) -> list[JobResult]:
        """Drop stored jobs from memory (a spooled run: session/spool.py): a final one is counted in `retired`, a
        queued one comes back when its window is read from the database (`adopt`). Their ids stay taken
        (`taken`: they are already, jobs read back)."""
        dropped = []
        for job_id in job_ids:
            result = self.jobs.pop(job_id, None)
            if result is None:
                continue
            del self.planned[job_id]
            if result.status in FINAL_STATUSES:
                self.retired[result.status] = self.retired.get(result.status, 0) + 1
            if not taken:
                self._taken.add(int(job_id[:12], 16))
            dropped.append(result)
        return dropped

    def adopt(self, job_id: str, entry: InputEntry, variant: Variant, backend: Backend) -> JobResult:
        """A queued job of a spooled run, read back from its stored row: held again, under its own id (FAILED,
        saying `entry.error`, when its command no longer plans)."""
        if entry.command is not None:
            return self._hold(job_id, entry, entry.command, variant, backend, self._func_name(entry.command),
                              stored=True)
        result = JobResult(job_id=job_id, command=entry.text, func_name="", op="", variant=variant.name,
                           target=self.target, backend=backend, status=FAILED, error=entry.error,
                           source=entry.source, calls=entry.calls, share=entry.share, captured_us=entry.captured_us)
        self.jobs[job_id] = result
        self.planned[job_id] = PlannedJob(command=None, variant=variant, backend=backend, iters=0, stored=True)
        return result

    def _new_id(self, text: str, variant: str, backend: str) -> str:
        """`job_id(...)` given the jobs so far (jobs are never removed, or their ids are `_taken`, so the first free
        suffix follows the last one taken)."""
        base = job_id(text, variant, backend, self.target)
        if base not in self.jobs and not (self._taken and int(base, 16) in self._taken):
            return base
        n = self._copies.get(base, 1) + 1
        while f"{base}-{n}" in self.jobs:
            n += 1
        self._copies[base] = n
        return f"{base}-{n}"

    def _func_name(self, command: Command) -> str:
        """The command's kernel name (a conv's takes ~20 us to build): once per command, and once for the copies
        of a line, which share their Command (`read_commands_file`); the recent ones are remembered."""
        known = self._func_names.get(id(command))
        if known is not None and known[0] is command:
            return known[1]
        if len(self._func_names) >= FUNC_NAMES_KEPT:
            self._func_names.clear()
        name = command.signature.func_name
        self._func_names[id(command)] = (command, name)
        return name

    def _add(self, entry: InputEntry, command: Command, variant: Variant, backend: Backend,
             func_name: str) -> JobResult:
        new_id = self._new_id(entry.text, variant.name, backend)
        result = self.resumed.get(new_id)
        if result is not None and entry.calls is not None:   # the weights given now win over the stored ones
            result.calls, result.share, result.captured_us = entry.calls, entry.share, entry.captured_us
        return self._hold(new_id, entry, command, variant, backend, func_name, result=result)

    def _hold(self, new_id: str, entry: InputEntry, command: Command, variant: Variant, backend: Backend,
              func_name: str, *, result: JobResult | None = None, stored: bool | None = None) -> JobResult:
        if result is None:
            result = JobResult(
                job_id=new_id, command=entry.text, func_name=func_name, op=command.signature.op, variant=variant.name,
                target=self.target, backend=backend, status=QUEUED, source=entry.source,
                calls=entry.calls, share=entry.share, captured_us=entry.captured_us,
            )
        self.jobs[new_id] = result
        self.planned[new_id] = PlannedJob(command=command, variant=variant, backend=backend,
                                          iters=self.iters or command.iters or DEFAULT_ITERS, stored=stored)
        return result

    def _add_failed(self, entry: InputEntry) -> JobResult:
        new_id = self._new_id(entry.text, NO_VARIANT, NO_BACKEND)
        word = entry.text.split(maxsplit=1)[0] if entry.text.strip() else "?"
        op = self._ops.setdefault(word, word) if len(self._ops) < OPS_KEPT else word   # one string per op word
        result = JobResult(
            job_id=new_id, command=entry.text, func_name="", op=op,
            variant=NO_VARIANT, target=self.target, backend=NO_BACKEND, status=FAILED,
            error=entry.error or "invalid command", source=entry.source, calls=entry.calls, share=entry.share,
            captured_us=entry.captured_us,
        )
        self.jobs[new_id] = result
        self.planned[new_id] = PlannedJob(command=None, variant=BASELINE, backend=None, iters=0)
        return result
