"""The search: for each kernel, candidates are compiled in the session's pool and measured in its benchmark
worker, interleaved with the kernel's baseline, then narrowed down until one is significantly faster or none is.

Per kernel, in order:
1. global choices (space.global_choices: flags, formulations), each screened;
2. tile sizes of the root op under the best of them (or under the compiler's defaults), proposed by optuna's TPE
   sampler in batches (`batch` at a time, so the pool compiles them in parallel): seeded, so the same seed
   proposes the same candidates; every measured ratio is told back, failures as failed trials;
3. successive halving: the best `keep` candidates by screening ratio are measured again with the baseline,
   longer (`halving_s`), and halved each time, down to one;
4. the final: the last one against the baseline (measured again, so a drift of the machine since the start is
   caught), for `final_s` each, interleaved. It goes on only if its numerics matched the baseline's outputs AND
   the verdict is FASTER (p < 0.05 over the paired rounds, change >= min_effect, CI excluding 1: compare.py);
5. the verification: winner and baseline once more, interleaved, in a NEW benchmark process (another placement
   of everything, as the session that uses tuned.toml will have). It wins only if it is still FASTER there, and
   the ratio reported and written is this one; the baseline's drift since the search began is reported.

Every measurement is a session job (stored with its samples in the run); every candidate and kernel outcome
is stored in the tune tables as soon as it is known (records.py), so `--resume` skips what a killed tune
already finished and reuses what it had screened.
"""
from __future__ import annotations

import contextlib
import shlex
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..config import SessionConfig
from ..errors import BooError
from ..events import Event
from ..fsutil import atomic_write
from ..results import DONE, FAILED, IREE, JobResult
from ..session import Session
from ..session.state import Listener as SessionListener
from ..variants import BASELINE, Variant
from ..variants.root_op import RootOp, read_root
from ..variants.tile_spec import SpecEntry, spec_module, symbol
from .context import TuneContext, TuneSettings
from .events import KernelTuned, TuneEvent, TuneLog, TuneUpdate
from .kernel import STAGE_ITERS, KernelSearch, configs_dir
from .offline import space_for
from .records import (
    IMPROVED,
    KERNEL_FAILED,
    NO_BETTER,
    RUNNING,
    KernelRoot,
    TunedKernel,
    TuneRecords,
    find_tune,
    load_kernels,
)
from .space import Candidate, GlobalChoice, global_choices

Listener = Callable[[TuneEvent], None]


class Tuner:
    """One tune: `run(inputs)` tunes every kernel of the inputs and returns their outcomes (also in `kernels`)."""

    def __init__(self, settings: TuneSettings, listener: Listener | None = None) -> None:
        self.settings = settings
        self._listener = listener
        self._stopped = threading.Event()
        self.session: Session | None = None
        self.records: TuneRecords | None = None
        self.kernels: dict[str, TunedKernel] = {}
        self.environment: dict[str, Any] = {}
        self.tune_id: int | None = None
        self._started = 0.0
        self._session_listener: SessionListener | None = None

    # ---- control ----------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop at once (Ctrl-C, the dashboard): what was measured is kept, the tune is left resumable."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        session = self.session
        if session is not None:
            with contextlib.suppress(BooError):   # the run may be closing by itself at this very moment
                session.interrupt()

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def on_session_event(self, fn: SessionListener) -> None:
        """Also hand every session event (samples, job status) to `fn` (the dashboard draws histograms)."""
        self._session_listener = fn

    def emit(self, event: TuneEvent) -> None:
        if self._listener is not None:
            with contextlib.suppress(Exception):
                self._listener(event)

    def out_of_time(self) -> bool:
        limit = self.settings.time_budget_s
        return self.stopped or (limit is not None and time.monotonic() - self._started > limit)

    # ---- the run ----------------------------------------------------------------------------------------
    def run(self, inputs: Sequence[str]) -> dict[str, TunedKernel]:
        s = self.settings
        self._started = time.monotonic()
        config = SessionConfig(**s.run_settings(), variants=[BASELINE], backends=(IREE,), verify_numerics=True,
                               trials=True)
        with Session(config, listener=self._forward) as session:
            self.session = session
            records = self.records = TuneRecords(session.store)
            previous, inputs = self._resume(session, records, inputs)
            unique = self._unique_kernels(session.add_inputs(inputs))
            self.environment = session.environment()
            if records.tune_id is None:
                records.start(command_line=s.command_line, target=session.target.name, out_dir=s.out_dir,
                              settings={**s.to_dict(), "inputs": list(inputs)}, environment=self.environment)
            self.tune_id = records.tune_id
            if not session.target.can_run():   # e.g. hip:gfx942 here: generate and compile, measure elsewhere
                self._compile_only(session, unique)
                records.finish("interrupted" if self.stopped else "done")
                return self.kernels
            self._baselines(session, records, unique, previous)
            self._tune_kernels(unique, previous)
            self._not_reached(session, unique)
            done = all(self.kernels[f].status != RUNNING for f in unique)
            records.finish("done" if done else "interrupted")
        return self.kernels

    def _resume(self, session: Session, records: TuneRecords,
                inputs: Sequence[str]) -> tuple[dict[str, TunedKernel], Sequence[str]]:
        """With --resume, the resumed tune's kernels and inputs (its records reopened); else none and `inputs`."""
        s = self.settings
        previous: dict[str, TunedKernel] = {}
        if s.resume is not None:
            info = find_tune(session.store, s.resume)
            previous = load_kernels(session.store, int(info["id"]))
            inputs = list(inputs) or list(info["settings"].get("inputs") or [])
            records.reopen(int(info["id"]))
        return previous, inputs

    def _unique_kernels(self, jobs: Sequence[JobResult]) -> dict[str, str]:
        """Kernel -> the job of its first command, warning of each bad input line; raises when there is none."""
        unique: dict[str, str] = {}
        for j in jobs:
            if j.status != FAILED or j.func_name:
                unique.setdefault(j.func_name, j.job_id)
        for j in jobs:
            if j.func_name == "" and j.error:
                self.emit(TuneLog(level="warning", message=f"{j.source or j.command}: {j.error}"))
        if not unique:
            raise BooError("nothing to tune: no valid command in the inputs")
        return unique

    def _compile_only(self, session: Session, unique: dict[str, str]) -> None:
        """Generate and compile every kernel's candidates without measuring them (a target this host cannot run)."""
        from .offline import compile_only

        commands = [(f, session.jobs[j].command, c) for f, j in unique.items()
                    if (c := session.command_of(j)) is not None]
        done_kernels = compile_only(self.context(), commands)
        for i, k in enumerate(done_kernels.values(), 1):
            self.kernels[k.func_name] = k
            self.emit(KernelTuned(kernel=k, index=i, total=len(unique)))

    def _baselines(self, session: Session, records: TuneRecords, unique: dict[str, str],
                   previous: dict[str, TunedKernel]) -> None:
        """Measure the baseline of every kernel not already decided, and link the session's run to the tune."""
        s = self.settings
        todo = [jid for f, jid in unique.items() if f not in previous
                or previous[f].status not in (IMPROVED, NO_BETTER, KERNEL_FAILED)]
        total = len(unique)
        for i, (func, jid) in enumerate(unique.items(), 1):
            self.emit(TuneUpdate(func_name=func, command=session.jobs[jid].command, index=i, total=total,
                                  stage="baseline", baseline_job=jid))
        try:
            session.start(todo, iters=STAGE_ITERS, min_time_s=s.screen_s)
        except BooError:
            if not self.stopped:   # stopped at this very moment: nothing to measure, the tune stays resumable
                raise
        session.wait()
        if session.run_id is not None:
            records.link_run(session.run_id)

    def _tune_kernels(self, unique: dict[str, str], previous: dict[str, TunedKernel]) -> None:
        """Search each kernel in turn (those a resumed tune decided are taken as they were), until out of time."""
        total = len(unique)
        for i, (func, jid) in enumerate(unique.items(), 1):
            prev = previous.get(func)
            if prev is not None and prev.status in (IMPROVED, NO_BETTER, KERNEL_FAILED):
                self.kernels[func] = prev
                self.emit(KernelTuned(kernel=prev, index=i, total=total))
                continue
            if self.out_of_time():
                break
            k = self._tune_kernel(i, total, func, jid, prev)
            self.kernels[func] = k
            self.emit(KernelTuned(kernel=k, index=i, total=total))

    def _not_reached(self, session: Session, unique: dict[str, str]) -> None:
        """An untuned outcome for each kernel the search did not reach."""
        for func, jid in unique.items():
            if func not in self.kernels:   # not reached: stopped, or the time budget was spent
                self.kernels[func] = TunedKernel(
                    func_name=func, command=session.jobs[jid].command, baseline_us=session.jobs[jid].median_us,
                    message="not tuned: " + ("stopped (--resume continues)" if self.stopped
                                             else "the time budget was spent"))

    def _forward(self, event: Event) -> None:
        if self._session_listener is not None:
            with contextlib.suppress(Exception):
                self._session_listener(event)

    # ---- one kernel -------------------------------------------------------------------------------------
    def _tune_kernel(self, index: int, total: int, func: str, base_id: str, prev: TunedKernel | None) -> TunedKernel:
        assert self.session is not None and self.records is not None
        session, s = self.session, self.settings
        t0 = time.monotonic()
        base = session.jobs[base_id]
        k = TunedKernel(func_name=func, command=base.command)
        ctx = KernelSearch(self.context(), k, base_id, index, total, {t.key: t for t in (prev.tried if prev else [])})
        if base.status != DONE or base.stats is None:
            k.status, k.message = KERNEL_FAILED, f"baseline failed: {base.error or base.status}"
            self.records.save_kernel(k)
            return k
        command = session.command_of(base_id)
        assert command is not None
        sig = command.signature
        root0 = read_root(configs_dir(base))
        k.root = _root_summary(root0)
        self.records.save_kernel(k)
        formulations = tuple(getattr(sig, "formulations", lambda: ())())
        choices = global_choices(sig, session.target, formulations)
        choices += [GlobalChoice(f"try{i}:{' '.join(f)}", f) for i, f in enumerate(self._try_flags(), 1)]
        level1 = [Candidate(func, ch) for ch in choices]
        ctx.screen(level1[: s.budget], stage="global")
        # tiles are searched under the fastest build whose root op a spec can configure (the default's, or a
        # global choice faster than it in screening); a data-tiled build, for one, has none
        start_choice, start_root = GlobalChoice("default"), root0
        for t in ctx.ranked():
            if (t.ratio or 2.0) >= 1.0 and root0 is not None:
                break
            root = read_root(configs_dir(session.jobs.get(t.job_id or "")))
            if root is not None:
                start_choice = next(c.choice for c in level1 if c.key == t.key)
                start_root = root
                break
        left = s.budget - len(ctx.tried_keys)
        space = space_for(start_root, session.target.kind) if start_root is not None else None
        if space is not None and left > 0 and not self.out_of_time():
            ctx.tile_search(start_choice, space, left)
        ctx.narrow()
        k.candidates = len(k.tried)
        k.seconds = round(time.monotonic() - t0, 2)
        if self.stopped:   # not decided: stored as running, so --resume searches it again (reusing what it had)
            k.status, k.best_key = RUNNING, None
            k.message = "stopped before it was decided (--resume continues)"
        self.records.save_kernel(k)
        return k

    def _try_flags(self) -> list[tuple[str, ...]]:
        return [tuple(shlex.split(f)) for f in self.settings.try_flags if f.strip()]

    def context(self) -> TuneContext:
        """What a kernel's search is handed (once the session and the records exist)."""
        assert self.session is not None and self.records is not None
        return TuneContext(settings=self.settings, session=self.session, records=self.records, emit=self.emit,
                           out_of_time=self.out_of_time, is_stopped=lambda: self.stopped,
                           variant_for=self.variant_for, candidate_variant=self.candidate_variant)

    # ---- candidates as variants -------------------------------------------------------------------------
    def variant_for(self, cand: Candidate) -> tuple[Variant, str | None]:
        """The variant that builds `cand` and the text that configures its root op (a spec, or on cuda the
        reconfigured dispatch), written under out_dir/candidates/."""
        text = None
        if cand.info is not None and cand.root is not None:
            if self._substitutes() and cand.root.source:
                from ..variants.common import SPEC_MARKER
                from .gpu_dispatch import configured_source

                text = configured_source(Path(cand.root.source).read_text(), cand.root, cand.info, SPEC_MARKER)
            else:
                text = spec_module([SpecEntry(symbol(f"match_{cand.key}"), cand.root, cand.info,
                                              (cand.describe(),))],
                                   header=(f"boo-tui tune candidate {cand.key} for {cand.func_name}",))
        dispatch = cand.root.dispatch if cand.root is not None else None
        return self.candidate_variant(cand.func_name, cand.key, text, cand.choice.flags, cand.choice.formulation,
                                      dispatch), text

    def candidate_variant(self, func: str, key: str, text: str | None, flags: Sequence[str], form: str | None,
                          dispatch: str | None) -> Variant:
        """The kernel-scoped variant of a candidate (also of one a resumed tune stored): `text` written under
        out_dir/candidates/ and passed as a tuning spec, or on cuda substituted for `dispatch`."""
        specs: tuple[str, ...] = ()
        subs: tuple[tuple[str, str, str], ...] = ()
        if text is not None:
            path = Path(self.settings.out_dir) / "candidates" / func / f"{key}.mlir"
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, text)
            if self._substitutes() and dispatch:
                subs = (("source", dispatch, str(path.resolve())),)
            else:
                specs = (str(path.resolve()),)
        return Variant(name=f"t-{key}", tuning_specs=specs, substitutions=subs, flags=tuple(flags), kernels=(func,),
                       kernel_formulations=((func, form),) if form else ())

    def _substitutes(self) -> bool:
        """IREE 3.13's cuda pipeline ignores tuning specs: a candidate's configuration is substituted instead."""
        return self.session is not None and self.session.target.kind == "cuda"


def _root_summary(root: RootOp | None) -> KernelRoot | None:
    if root is None:
        return None
    return {"dispatch": root.dispatch, "op": root.op_name, "kind": root.kind, "bounds": list(root.bounds),
            "types": list(root.elem_types), "pipeline": root.pipeline, "cpu": root.target_cpu,
            "tiles": {k: list(v) for k, v in root.tiles.items()}}
