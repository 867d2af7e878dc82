"""A session's input side: what the caller gives (commands files, command strings, a resumed run's commands,
variants added mid-session) turned into the plan's jobs, each announced as `JobQueued`.

Quick work on the caller's thread, under the state lock a job at a time (a 200,000-line file is planned a line at
a time: what a line was read as is gone once its jobs are made). The session forwards its `add_*` methods here.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from .. import events as ev
from ..commands import Command, looks_like_commands_file, parse_invocation, split_words
from ..commands.driver_flags import ignored_flags_note
from ..config import SessionConfig
from ..errors import BooError, CommandError, elide
from ..results import JobResult
from ..variants import Variant
from .plan import InputEntry, Plan
from .reader import read_lines
from .recording import RunRecorder
from .state import SessionState, collector_paused


class Intake:
    """Inputs -> the plan's jobs. Owns the session's variant list (a variant added mid-session, or a resumed run's
    own, joins it) and the one note about MIOpenDriver flags that change nothing here."""

    def __init__(self, plan: Plan, state: SessionState, recorder: RunRecorder, config: SessionConfig,
                 variants: list[Variant]) -> None:
        self._plan = plan
        self._state = state
        self._recorder = recorder
        self._config = config
        self.variants = variants
        #: said once per run, for the first command carrying MIOpenDriver flags that change nothing here (-w, -s...)
        self.driver_flags_note: str | None = None

    def add_inputs(self, inputs: Sequence[str]) -> list[JobResult]:
        """Commands files (a path to an existing file, or any *.txt / *.tsv) and command strings. A bad line of a
        file becomes a FAILED job naming file:line; a bad command string or a missing file raises CommandError."""
        return [job for jobs in self.each(inputs) for job in jobs]

    def each(self, inputs: Sequence[str]) -> Iterator[list[JobResult]]:
        """`add_inputs`, an input (a file's line) at a time: its jobs."""
        for item in inputs:
            if looks_like_commands_file(item):
                for _, jobs in self.lines(item):
                    yield jobs
            else:
                yield self.add_command(item)

    def lines(self, path: str, extra_args: Sequence[str] = ()) -> Iterator[tuple[str, list[JobResult]]]:
        """Every line of a commands file, as (line text, its jobs), a line at a time; a bad line gets one FAILED
        job naming file:line. A missing or unreadable file raises CommandError. A big file is parsed by a
        process of its own (session/reader.py), which also works out each line's kernel name and facts."""
        extra = list(extra_args) + list(self._config.extra_args)
        # (closed at once on the way out, a stop included: a reader process ends with it)
        with collector_paused(), contextlib.closing(read_lines(path, extra)) as lines:
            for line, func_name, facts in lines:
                if facts is not None:
                    self._recorder.know_facts(line.text, facts)
                yield line.text, self.add_entry(InputEntry.from_line(line), func_name)

    def add_command(self, text: str | Sequence[str], *, source: str | None = None) -> list[JobResult]:
        """One command string; raises CommandError (one line) when it does not parse."""
        return self.add_entry(InputEntry.from_command(self.parse(text), source))

    def parse(self, text: str | Sequence[str]) -> Command:
        """A command string (or its words) with the session's extra arguments; CommandError when it does not
        parse."""
        if isinstance(text, str):
            try:
                tokens = split_words(text)
            except ValueError as e:  # an unbalanced quote
                raise CommandError(f"cannot split command {elide(text)!r}: {e}") from None
        else:
            tokens = list(text)
        return parse_invocation(tokens + list(self._config.extra_args))

    def add_resumed_commands(self) -> list[JobResult]:
        """`--resume` given no inputs: the resumed run's own commands, as recorded with it, on its backends,
        with its variants (unless variants were given) and its session-wide --iter (unless one was given)."""
        entries, variants, backends, iters = self._recorder.resumed_inputs()
        with self._state.lock:
            if variants and all(v.is_baseline or v.best for v in self.variants):   # no --variant: the run's own
                self.variants = variants
            if backends:
                self._plan.backends = backends
            self._plan.iters = self._plan.iters or iters
        added: list[JobResult] = []
        for entry in entries:
            added += self.add_entry(entry)
        return added

    def add_variant(self, variant: Variant) -> list[JobResult]:
        """A variant added mid-session: it gets a (queued, not started) job for every command so far it applies to."""
        with self._state.lock:
            if any(v.name == variant.name for v in self.variants):
                raise BooError(f"variant {variant.name!r} already exists")
            if self._state.spooled:   # (its commands are in the database, not held: session/spool.py)
                raise BooError(f"variant {variant.name!r}: this run is too big to hold, and takes no variant "
                               "added mid-session; give it with the inputs (--variant)")
            self.variants.append(variant)
            self._recorder.register_variant(variant)
            return self._announce(self._plan.add_variant(variant))

    def add_entry(self, entry: InputEntry, func_name: str | None = None) -> list[JobResult]:
        """One input's jobs (a bad one's single FAILED job), announced (`func_name`: its kernel's, when known)."""
        if entry.command is not None and entry.command.ignored_flags and self.driver_flags_note is None:
            self.driver_flags_note = ignored_flags_note(entry.command.ignored_flags)
            self._state.emit(ev.Log(level="info", message=self.driver_flags_note))
        with self._state.lock:
            return self._announce(self._plan.add_entry(entry, self.variants, func_name))

    def _announce(self, added: list[JobResult]) -> list[JobResult]:
        for result in added:
            self._state.emit(ev.JobQueued(job_id=result.job_id, result=result))
        return added
