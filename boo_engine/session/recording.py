"""The session's run in the store: what is written to SQLite, and when.

Owns the run id and every store write of a session: starting a run (or resuming one: `--resume` repairs a
killed run and hands back its finished results so they are not measured again), registering variants and
commands, recording each job as it is queued and when it reaches a final status (`finish`), and closing the
run with its status. Nothing here measures or compiles.
"""
from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__
from .. import events as ev
from ..config import SessionConfig
from ..environment import machine_label
from ..errors import BooError
from ..results import FAILED, FINAL_STATUSES, INTERRUPTED, QUEUED, JobResult, RunStatus, Status, is_bad_input
from ..store.rows import dumps
from ..targets import OUR_BUILD
from ..variants import BASELINE, Variant
from .plan import InputEntry
from .state import SessionState, halted_error

if TYPE_CHECKING:  # the store package is imported when a Session is made, not when this module is
    from ..store import Store


#: facts worked out by a big file's reader kept at most until their rows are stored (RunRecorder.know_facts)
KNOWN_FACTS_KEPT = 20_000


class RunRecorder:
    def __init__(self, store: Store, state: SessionState, config: SessionConfig, target: str) -> None:
        self.store = store
        self.run_id: int | None = None       # None until the first start() (or a resume) opens the run
        self._state = state
        self._config = config
        self._target = target
        self._registered_commands: set[str] = set()
        #: a command's facts (its signature's describe() as JSON) worked out by a big file's reader, until stored
        self._known_facts: dict[str, str] = {}
        self._resumed = False                # a run of an earlier process: its jobs may have rows already

    # ---- the run -------------------------------------------------------------------------------------------
    def resume(self, run_id: int | str, environment: Callable[[], dict[str, Any]]) -> dict[str, JobResult]:
        """Continue run `run_id` ("last": the newest). Returns its finished results by job id: the jobs that
        get these ids again are not measured again. Raises BooError / StoreError (one line) when there is no
        such run, or when it was measured on another machine than `environment()` describes."""
        if run_id == "last":
            last = self.store.last_run_id()
            if last is None:
                raise BooError(f"--resume: no run to resume in {self.store.path}")
            run_id = last
        elif isinstance(run_id, str):  # the CLI already made it an int; a library caller may not have
            try:
                run_id = int(run_id)
            except ValueError:
                raise BooError(f"--resume expects a run id, got {run_id!r}") from None
        info = self.store.run_info(run_id)  # StoreError (one line) when there is no such run
        from ..store.owner import owner_alive

        if info["status"] == "running" and owner_alive(info):
            raise BooError(f"--resume: run {run_id} is still running (pid {info['owner_pid']}): stop it first")
        _same_machine(run_id, info.get("environment") or {}, environment())
        self._adopt_run_flags(run_id, (info.get("config") or {}).get("compile_flags") or [])
        # the build its plain variants had: a run stored before builds were recorded built ours
        self._config.build = str((info.get("config") or {}).get("build") or OUR_BUILD)
        self.store.mark_interrupted(run_id)  # repair a run whose process was killed
        done = self.store.finished_job_ids(run_id)
        resumed = {r.job_id: r for r in self.store.load_results(run_id) if r.job_id in done}
        self.store.resume_run(run_id)
        self.run_id = run_id
        self._resumed = True
        return resumed

    def _adopt_run_flags(self, run_id: int, stored: list[str]) -> None:
        """A resumed run compiles with the --flags it was started with: taken from the run when none are given,
        an error when others are (one run, one set of flags: its results would not be comparable)."""
        given = tuple(self._config.compile_flags)
        if not given:
            self._config.compile_flags = tuple(str(f) for f in stored)
        elif given != tuple(stored):
            raise BooError(f"--resume: run {run_id} was measured with --flags {' '.join(stored) or '(none)'!r}, "
                           f"not {' '.join(given)!r}")

    def resumed_inputs(self) -> tuple[list[InputEntry], list[Variant], list[str], int | None]:
        """What the run being resumed measured, read back from the store: its commands (as entries with the
        same text, so their jobs get the same ids), its variants, backends and session-wide --iter."""
        from ..commands import parse_invocation

        if self.run_id is None:
            raise BooError("no run is being resumed")
        config = self.store.run_info(self.run_id).get("config") or {}
        extra = [str(a) for a in config.get("extra_args") or []]
        entries = []
        for text, source, calls, share, captured_us in self.store.run_commands(self.run_id):
            try:
                entries.append(InputEntry(source, text, parse_invocation(shlex.split(text) + extra), calls=calls,
                                          share=share, captured_us=captured_us))
            except (BooError, ValueError) as e:   # a bad line of the run: failed again, as it was
                entries.append(InputEntry(source, text, None, str(e), calls=calls, share=share,
                                          captured_us=captured_us))
        variants = [Variant.from_description(d) for d in config.get("variants") or []]
        backends = [str(b) for b in config.get("backends") or []]
        iters = config.get("iters")
        return entries, variants, backends, int(iters) if iters else None

    def start_run(self, environment: dict[str, Any], variants: list[Variant]) -> None:
        """Open the run in the store (once: a later start() adds to the same run)."""
        if self.run_id is not None:
            return
        self.run_id = self.store.start_run(
            command_line=self._config.command_line or " ".join(shlex.quote(a) for a in sys.argv),
            target=self._target,
            config=config_dict(self._config, variants),
            environment=environment,
        )
        for variant in variants:
            self.register_variant(variant)
        self._state.emit(ev.RunStarted(run_id=self.run_id, total_jobs=len(self._state.jobs)))

    def run_status(self, interrupted: bool) -> RunStatus:
        """How the run ended: interrupted when stopped, or when a job was never measured (cancelled, or left
        queued: a run with 2 such jobs read `done`, and --resume measures them); failed when a job failed; else
        done. A tune's candidates cancelled by its search are not the run's unfinished work."""
        if interrupted:
            return RunStatus.INTERRUPTED
        ok, failed = self._state.counts()
        if not self._config.trials and ok + failed < self._state.plan.total:
            return RunStatus.INTERRUPTED
        if self._config.trials and failed:   # a tune that exited 0 was stored `failed` for 2 pruned candidates
            with self._state.lock:
                failed = sum(1 for r in self._state.jobs.values() if r.status == FAILED
                             and (r.variant == BASELINE.name or is_bad_input(r)))
        return RunStatus.FAILED if failed else RunStatus.DONE

    def end_run(self, status: RunStatus, *, counts: tuple[int, int] | None = None, flush: bool = False) -> None:
        """Mark the run `status` in the store and tell the front ends. It may be reopened by a later start().
        `counts`: (done, failed) as they were when `status` was decided (default: now)."""
        if self.run_id is None:
            return
        from ..store import StoreWriteError

        ok, failed = self._state.counts() if counts is None else counts
        if self._state.halted is not None and self._state.store_broken:
            status = RunStatus.INTERRUPTED   # left `running` in the file: --resume repairs and continues it
        else:
            if self._state.halted is not None:   # the cluster went away: the file is fine, the run interrupted
                status = RunStatus.INTERRUPTED
            try:
                self.store.finish_run(self.run_id, status)
                if flush:
                    self.store.flush()
            except StoreWriteError as e:   # the file filled up meanwhile: the writer already told the session
                self._state.halt(str(e), store_halt_reason(e))
                status = RunStatus.INTERRUPTED
        self._state.emit(ev.RunFinished(run_id=self.run_id, status=status, ok=ok, failed=failed))

    # ---- what the results refer to ---------------------------------------------------------------------------
    def register_variant(self, variant: Variant) -> None:
        """Store a variant's flags and spec text with the run (nothing before the run is open: start_run
        registers the variants known then)."""
        if self.run_id is None:
            return
        spec_text = "\n".join(Path(s).read_text(errors="replace") for s in variant.tuning_specs) or None
        self.store.register_variant(self.run_id, variant.name, flags=variant.compile_flags(), spec_text=spec_text,
                                    details=variant.describe())

    # ---- jobs ----------------------------------------------------------------------------------------------
    def record(self, result: JobResult) -> None:
        """Write the job's row (queued or final); its command is registered on first sight."""
        if self.run_id is None:
            return
        job = self._state.plan.planned.get(result.job_id)
        if job is not None:
            job.stored = True
        if job is not None and job.command is not None and result.command not in self._registered_commands:
            self._registered_commands.add(result.command)
            sig = job.command.signature
            self.store.register_command(result.command, op=sig.op, func_name=result.func_name,
                                        signature=sig.describe())
        self.store.record_result(self.run_id, result)

    def record_many(self, results: list[JobResult]) -> None:
        """`record` each result, in order: the first rows of jobs never stored in a run this session opened go to
        the store in bulk (`Store.record_new`: 200,000 queued jobs of a big file, a few statements per 1,000), the
        others one by one."""
        if self.run_id is None:
            return
        planned = self._state.plan.planned
        fresh: list[JobResult] = []
        commands: list[tuple[str, str | None, str | None, str | None]] = []
        for result in results:
            job = planned.get(result.job_id)
            if self._resumed or job is None or job.stored is not None:   # it may have a row: written as ever
                if fresh:
                    self.store.record_new(self.run_id, fresh, commands)
                    fresh, commands = [], []
                self.record(result)
                continue
            job.stored = True
            if job.command is not None and result.command not in self._registered_commands:
                self._registered_commands.add(result.command)
                sig = job.command.signature
                facts = self._known_facts.pop(result.command, None) or dumps(sig.describe())
                commands.append((result.command, sig.op, result.func_name, facts))
            fresh.append(result)
        if fresh:
            self.store.record_new(self.run_id, fresh, commands)

    def know_facts(self, command: str, facts: str) -> None:
        """`command`'s facts, as JSON, worked out already (session/reader.py: in the process that resolved an aten
        call, so they name its overload and outputs): stored with its first row, instead of worked out again here.
        KNOWN_FACTS_KEPT at most wait (more than a spooled run stores at once); the others are worked out here."""
        if len(self._known_facts) < KNOWN_FACTS_KEPT:
            self._known_facts[command] = facts

    def forget_commands(self) -> None:
        """The commands registered so far are not remembered (a spooled run: one may be registered again, which
        changes nothing, rather than every command's text held)."""
        self._registered_commands.clear()

    def interrupt_unfinished(self) -> None:
        """The session stops: every job not final yet ends INTERRUPTED, saying why (the caller holds the state
        lock)."""
        state = self._state
        halted, closed = state.halted is not None, "interrupted: the session closed before this job finished"
        queued = []   # never left the queue: their rows (if any) say queued and hold nothing else
        for result in [r for r in state.jobs.values() if r.status not in FINAL_STATUSES]:
            if result.status == QUEUED and state.job(result.job_id).stored is not None:
                queued.append(result)
            else:   # it got further (compiled, measured), or never asked to run: stored with what it has
                self.finish(result, INTERRUPTED, error=halted_error(result, state.halt_reason) if halted else closed)
        self.finish_queued(queued, INTERRUPTED, f"not measured: {state.halt_reason}" if halted else closed)

    def finish_queued(self, results: list[JobResult], status: Status, error: str) -> None:
        """Jobs that never left the queue reached a final status: stamped and told to the front ends one by one,
        and their stored rows (which say queued and hold nothing else) changed in one statement: 200,000 of them
        in a second, where a write each took minutes. A job without a row (`PlannedJob.stored` False) gets none."""
        now = time.time()
        for result in results:
            result.status = status
            result.error = error
            result.finished_at = now
            self._state.emit(ev.JobFinished(job_id=result.job_id, result=result))
        if (results or self._state.spooled) and self.run_id is not None:   # (spooled: rows not held say queued)
            self.store.finish_queued(self.run_id, status, error, now)

    def finish(self, result: JobResult, status: Status, *, error: str | None = None) -> None:
        """A job reached a final status: stamp it, tell the front ends, store it."""
        result.status = status
        if error is not None:
            result.error = error
        result.finished_at = time.time()
        self._state.emit(ev.JobFinished(job_id=result.job_id, result=result))
        self.record(result)


def store_halt_reason(error: BaseException) -> str:
    """What the jobs a store failure leaves unmeasured say (short: the one line with the path is the run's)."""
    reason = getattr(error, "reason", None) or "a write failed"
    return f"the run stopped: the results database took no more writes ({reason})"


def config_dict(cfg: SessionConfig, variants: list[Variant]) -> dict[str, Any]:
    """The settings stored with the run (what `boo-tui runs` shows, and what makes two runs comparable)."""
    return {
        "target": cfg.target,
        "variants": [v.describe() for v in variants],
        "backends": list(cfg.backends),
        "iters": cfg.iters,
        "min_time_s": cfg.min_time_s,
        "max_time_s": cfg.max_time_s,
        "threads": cfg.threads,
        "seed": cfg.seed,
        "splat_value": cfg.splat_value,
        "verify_numerics": cfg.verify_numerics,
        "rounds": cfg.rounds,
        "min_effect": cfg.min_effect,
        "extra_args": list(cfg.extra_args),
        "per_op_defaults": cfg.per_op_defaults,
        "build": cfg.build,
        "devices": list(cfg.devices),
        "compile_flags": list(cfg.compile_flags),
        "tool_version": __version__,
    }


def _same_machine(run_id: int, theirs: dict[str, Any], ours: dict[str, Any]) -> None:
    """A run is resumed only on the machine that measured it. A database copied from a laptop and resumed here
    measured its remaining jobs here and filed them under the laptop's host, CPU and GPU: one run, two machines,
    numbers that look comparable and are not. (A run with no recorded machine passes: nothing to contradict.)"""
    there, here = machine_label(theirs), machine_label(ours)
    if there is not None and here is not None and there != here:
        raise BooError(f"--resume: run {run_id} was measured on another machine ({there}; this is {here}): its "
                       "results and this machine's would be filed as one run; measure here as a new run "
                       "(the same inputs without --resume)")
