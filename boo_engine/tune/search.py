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
   caught), for `final_s` each, interleaved. It wins only if its numerics matched the baseline's outputs AND
   the verdict is FASTER (Mann-Whitney p < 0.05, change >= min_effect, CI excluding 1), as for any variant.

Every measurement is a session job (stored with its samples in the run); every candidate and kernel outcome
is stored in the tune tables as soon as it is known (records.py), so `--resume` skips what a killed tune
already finished and reuses what it had screened.
"""
from __future__ import annotations

import contextlib
import json
import shlex
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..compare import DEFAULT_MIN_EFFECT, Verdict, compare_samples
from ..config import SessionConfig
from ..errors import BooError, first_line
from ..fsutil import atomic_write
from ..results import CANCELLED, DONE, INTERRUPTED, IREE, JobResult
from ..session import Session
from ..variants import BASELINE, Variant
from .dispatch import RootOp, read_root
from .events import KernelTuned, TuneEvent, TuneLog, TuneUpdate
from .records import (
    COMPILE_FAILED,
    DUPLICATE,
    FAILED,
    IMPROVED,
    KERNEL_FAILED,
    MEASURED,
    NO_BETTER,
    NOT_APPLIED,
    NUMERICS_FAILED,
    RUNNING,
    Tried,
    TunedKernel,
    TuneRecords,
    find_tune,
    load_kernels,
)
from .space import Candidate, GlobalChoice, SearchSpace, global_choices, tile_space
from .spec import SpecEntry, spec_module, symbol

#: samples per job per stage at least (with the stage's minimum time): one per interleaving round
STAGE_ITERS = 5


@dataclass
class TuneSettings:
    target: str | None = None
    out_dir: str = "tuned"
    budget: int = 32                     # candidates per kernel (global choices + tile configurations)
    time_budget_s: float | None = None   # for the whole tune: no new candidate after it
    seed: int = 0
    min_effect: float = DEFAULT_MIN_EFFECT
    batch: int = 8                       # candidates compiled, then screened, together
    screen_s: float = 0.05               # measuring time per candidate per screening batch
    halving_s: tuple[float, ...] = (0.2, 0.5)
    final_s: float = 1.5
    keep: int = 4                        # candidates entering successive halving
    threads: int = 1
    db_path: str | None = None
    cache_dir: str | None = None
    compile_workers: int | None = None
    resume: int | str | None = None
    command_line: str = ""
    try_flags: tuple[str, ...] = ()      # the user's own flag sets, tried on every kernel as global choices

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["halving_s"] = list(self.halving_s)
        return d


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
        self._session_listener: Callable[[Any], None] | None = None

    # ---- control ----------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop at once (Ctrl-C, the dashboard): what was measured is kept, the tune is left resumable."""
        self._stopped.set()
        if self.session is not None:
            self.session.interrupt()

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def on_session_event(self, fn: Callable[[Any], None]) -> None:
        """Also hand every session event (samples, job status) to `fn` (the dashboard draws histograms)."""
        self._session_listener = fn

    def _emit(self, event: TuneEvent) -> None:
        if self._listener is not None:
            with contextlib.suppress(Exception):
                self._listener(event)

    def _out_of_time(self) -> bool:
        limit = self.settings.time_budget_s
        return self.stopped or (limit is not None and time.monotonic() - self._started > limit)

    # ---- the run ----------------------------------------------------------------------------------------
    def run(self, inputs: Sequence[str]) -> dict[str, TunedKernel]:
        s = self.settings
        self._started = time.monotonic()
        config = SessionConfig(
            target=s.target, variants=[BASELINE], backends=(IREE,), threads=s.threads, seed=s.seed,
            db_path=s.db_path, cache_dir=s.cache_dir, compile_workers=s.compile_workers, min_effect=s.min_effect,
            command_line=s.command_line, verify_numerics=True)
        with Session(config, listener=self._forward) as session:
            self.session = session
            records = self.records = TuneRecords(session.store)
            previous: dict[str, TunedKernel] = {}
            if s.resume is not None:
                info = find_tune(session.store, s.resume)
                previous = load_kernels(session.store, int(info["id"]))
                inputs = list(inputs) or list(info["settings"].get("inputs") or [])
                records.reopen(int(info["id"]))
            jobs = session.add_inputs(inputs)
            unique: dict[str, str] = {}
            for j in jobs:
                if j.status != "failed" or j.func_name:
                    unique.setdefault(j.func_name, j.job_id)
            for j in jobs:
                if j.func_name == "" and j.error:
                    self._emit(TuneLog(level="warning", message=f"{j.source or j.command}: {j.error}"))
            if not unique:
                raise BooError("nothing to tune: no valid command in the inputs")
            self.environment = session.environment()
            if records.tune_id is None:
                records.start(command_line=s.command_line, target=session.target.name, out_dir=s.out_dir,
                              settings={**s.to_dict(), "inputs": list(inputs)}, environment=self.environment)
            self.tune_id = records.tune_id
            todo = [jid for f, jid in unique.items() if f not in previous
                    or previous[f].status not in (IMPROVED, NO_BETTER, KERNEL_FAILED)]
            total = len(unique)
            for i, (func, jid) in enumerate(unique.items(), 1):
                self._emit(TuneUpdate(func_name=func, command=session.jobs[jid].command, index=i, total=total,
                                      stage="baseline", baseline_job=jid))
            session.start(todo, iters=STAGE_ITERS, min_time_s=s.screen_s)
            session.wait()
            if session.run_id is not None:
                records.link_run(session.run_id)
            for i, (func, jid) in enumerate(unique.items(), 1):
                prev = previous.get(func)
                if prev is not None and prev.status in (IMPROVED, NO_BETTER, KERNEL_FAILED):
                    self.kernels[func] = prev
                    self._emit(KernelTuned(kernel=prev, index=i, total=total))
                    continue
                if self._out_of_time():
                    break
                k = self._tune_kernel(i, total, func, jid, prev)
                self.kernels[func] = k
                self._emit(KernelTuned(kernel=k, index=i, total=total))
            for func, jid in unique.items():
                if func not in self.kernels:   # not reached: stopped, or the time budget was spent
                    self.kernels[func] = TunedKernel(
                        func_name=func, command=session.jobs[jid].command, baseline_us=_median(session.jobs[jid]),
                        message="not tuned: " + ("stopped (--resume continues)" if self.stopped
                                                 else "the time budget was spent"))
            done = all(self.kernels[f].status != RUNNING for f in unique)
            records.finish("done" if done else "interrupted")
        return self.kernels

    def _forward(self, event: Any) -> None:
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
        ctx = _KernelContext(self, k, base_id, index, total, {t.key: t for t in (prev.tried if prev else [])})
        if base.status != DONE or base.stats is None:
            k.status, k.message = KERNEL_FAILED, f"baseline failed: {base.error or base.status}"
            self.records.save_kernel(k)
            return k
        command = session.command_of(base_id)
        assert command is not None
        sig = command.signature
        root0 = read_root(_configs_dir(base))
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
            root = read_root(_configs_dir(session.jobs.get(t.job_id or "")))
            if root is not None:
                start_choice = next(c.choice for c in level1 if c.key == t.key)
                start_root = root
                break
        left = s.budget - len(ctx.tried_keys)
        if start_root is not None and left > 0 and session.target.kind == "cpu" and not self._out_of_time():
            ctx.tile_search(start_choice, tile_space(start_root), left)
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

    # ---- candidates as variants -------------------------------------------------------------------------
    def variant_for(self, cand: Candidate) -> tuple[Variant, str | None]:
        """The variant that builds `cand` (its spec written under out_dir/candidates/) and the spec text."""
        specs: tuple[str, ...] = ()
        text = None
        if cand.info is not None and cand.root is not None:
            text = spec_module([SpecEntry(symbol(f"match_{cand.key}"), cand.root, cand.info, (cand.describe(),))],
                               header=(f"boo-tui tune candidate {cand.key} for {cand.func_name}",))
            path = Path(self.settings.out_dir) / "candidates" / cand.func_name / f"{cand.key}.mlir"
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, text)
            specs = (str(path.resolve()),)
        form = cand.choice.formulation
        return Variant(name=f"t-{cand.key}", tuning_specs=specs, flags=cand.choice.flags, kernels=(cand.func_name,),
                       kernel_formulations=((cand.func_name, form),) if form else ()), text


class _KernelContext:
    """The search state of one kernel (its tried candidates, its jobs) and the stages that use it."""

    def __init__(self, tuner: Tuner, kernel: TunedKernel, base_id: str, index: int, total: int,
                 known: dict[str, Tried]) -> None:
        self.tuner = tuner
        self.k = kernel
        self.base_id = base_id
        self.index = index
        self.total = total
        self.known = known   # from the tune being resumed
        self.tried_keys: set[str] = set()

    @property
    def session(self) -> Session:
        assert self.tuner.session is not None
        return self.tuner.session

    def best(self, n: int = 1) -> Tried | None:
        ranked = self.ranked()
        return ranked[0] if ranked else None

    def ranked(self) -> list[Tried]:
        return sorted((t for t in self.k.tried if t.ok), key=lambda t: float(t.ratio or 0))

    def update(self, stage: str, message: str = "") -> None:
        tried = self.k.tried
        best = self.best()
        self.tuner._emit(TuneUpdate(
            func_name=self.k.func_name, command=self.k.command, index=self.index, total=self.total, stage=stage,
            tried=len(tried), compiled=sum(1 for t in tried if t.status != COMPILE_FAILED),
            failed=sum(1 for t in tried if t.status != MEASURED), measured=sum(1 for t in tried if t.ok),
            best_ratio=best.ratio if best else None, best=best.description if best else None,
            leader_job=best.job_id if best else None, baseline_job=self.base_id, message=message))

    # ---- screening --------------------------------------------------------------------------------------
    def screen(self, cands: Sequence[Candidate], stage: str) -> list[Tried]:
        """Measure each new candidate briefly beside the baseline; candidates a resumed tune already screened
        are taken as they were."""
        out: list[Tried] = []
        fresh: list[Candidate] = []
        for c in cands:
            if c.key in self.tried_keys:
                continue
            self.tried_keys.add(c.key)
            old = self.known.get(c.key)
            if old is not None and (old.status != MEASURED or old.ratio is not None):
                old.stage = stage   # screened by the tune being resumed: taken as it was
                self.k.tried.append(old)
                out.append(old)
                continue
            fresh.append(c)
        batch = self.tuner.settings.batch
        for i in range(0, len(fresh), batch):
            if self.tuner._out_of_time():
                break
            out += self.measure(fresh[i:i + batch], stage)
        return out

    def measure(self, cands: Sequence[Candidate], stage: str) -> list[Tried]:
        tuner, session = self.tuner, self.session
        assert tuner.records is not None
        base = session.jobs[self.base_id]
        entries: list[tuple[Candidate, Variant, str | None, str]] = []
        for c in cands:
            variant, text = tuner.variant_for(c)
            jobs = session.add_variant(variant)
            mine = [j for j in jobs if j.command == base.command]
            others = [j.job_id for j in jobs if j.command != base.command]
            if others:
                session.cancel(others)   # the same kernel given twice: measured once
            if mine:
                entries.append((c, variant, text, mine[0].job_id))
        self.update(stage, f"compiling and screening {len(entries)} candidates")
        session.rerun([self.base_id] + [e[3] for e in entries], iters=STAGE_ITERS,
                      min_time_s=tuner.settings.screen_s)
        session.wait()
        base_med = _median(session.jobs[self.base_id])
        binaries = {binary_hash(session.jobs[self.base_id]): "the default"}
        binaries.update({t.artifact_key: t.description for t in self.k.tried if t.ok})
        out = []
        for c, variant, text, job_id in entries:
            t = Tried(func_name=c.func_name, key=c.key, params=c.params, variant=variant.name,
                      description=c.describe(), spec=text, stage=stage, job_id=job_id, run_id=session.run_id)
            r = session.jobs[job_id]
            if r.status in (INTERRUPTED, CANCELLED):   # stopped before it was measured: not a result
                continue
            classify(t, r, base_med)
            same = binaries.get(t.artifact_key) if t.artifact_key else None
            if t.ok and same is not None:   # the same binary as one already measured: one candidate, not two
                t.status, t.error = DUPLICATE, f"same binary as {same}"
            elif t.ok:
                binaries[t.artifact_key] = t.description
            tuner.records.save_candidate(t)
            self.k.tried.append(t)
            out.append(t)
        self.update(stage)
        return out

    # ---- tile search ------------------------------------------------------------------------------------
    def tile_search(self, choice: GlobalChoice, space: SearchSpace, budget: int) -> None:
        """Propose tile configurations with optuna's TPE sampler, `batch` at a time, telling it each ratio."""
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        s = self.tuner.settings
        sampler = optuna.samplers.TPESampler(seed=s.seed, n_startup_trials=min(10, max(2, budget // 3)),
                                             multivariate=True)
        study = optuna.create_study(direction="minimize", sampler=sampler)
        names = list(space.choices)
        proposed = 0
        stale = 0
        while proposed < budget and not self.tuner._out_of_time() and stale < 3 * s.batch:
            trials: list[tuple[Any, Candidate]] = []
            while len(trials) < min(s.batch, budget - proposed) and stale < 3 * s.batch:
                trial = study.ask()
                params = {n: trial.suggest_categorical(n, list(space.choices[n])) for n in names}
                cand = space.candidate(self.k.func_name, choice, params)
                if isinstance(cand, str):   # breaks a constraint of the target (shared memory, divisibility)
                    stale += 1
                    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                    continue
                if cand.key in self.tried_keys:   # a configuration already tried: tell its result again
                    stale += 1
                    old = next((t for t in self.k.tried if t.key == cand.key), None)
                    _tell(study, trial, old)
                    continue
                trials.append((trial, cand))
                proposed += 1
            if not trials:
                break
            tried = {t.key: t for t in self.screen([c for _, c in trials], stage="tiles")}
            for trial, cand in trials:
                _tell(study, trial, tried.get(cand.key))
            built = [t for t in tried.values() if t.status != COMPILE_FAILED]
            if built and all(t.status == NOT_APPLIED for t in built):
                # seen on batch-1 convolutions: a later rewrite of the op drops what the spec set, so no tile
                # configuration can take effect; the rest of the budget would be spent on the default kernel
                self.tuner._emit(TuneLog(level="warning", message=(
                    f"{self.k.func_name}: no tile configuration survives the compiler's rewrite of "
                    f"{space.root.op_name} (spec not applied); tile search stopped")))
                break

    # ---- successive halving and the final ---------------------------------------------------------------
    def narrow(self) -> None:
        """Halve the best screened candidates over longer, interleaved measurements, then put the last one
        against the baseline; decide the kernel's outcome."""
        tuner, session, k = self.tuner, self.session, self.k
        s = tuner.settings
        alive = [t for t in self.ranked() if (t.ratio or 2.0) < 1.0][: s.keep]
        if not alive:
            self.finish(None, "no better configuration found: no candidate was faster in screening")
            return
        for n, secs in enumerate(s.halving_s, 1):
            if len(alive) <= 1 or tuner.stopped:
                break
            self.update(f"halving-{n}", f"{len(alive)} candidates, {secs:g} s each")
            self._remeasure(alive, secs, f"halving-{n}")
            alive = [t for t in sorted(alive, key=_ratio_key) if t.ok][: max(1, len(alive) // 2)]
        if not alive or tuner.stopped:
            self.finish(None, "stopped before the final measurement" if tuner.stopped
                        else "no better configuration found")
            return
        leader = alive[0]
        self.update("final", f"{leader.description} against the baseline, {s.final_s:g} s each")
        self._remeasure([leader], s.final_s, "final", iters=4 * STAGE_ITERS)
        if tuner.stopped:
            self.finish(None, "stopped before the final measurement")
            return
        base, job = session.jobs[self.base_id], session.jobs[leader.job_id or ""]
        if not leader.ok or base.stats is None or not job.samples_us:
            self.finish(None, f"no better configuration found: the leader {leader.status} in the final")
            return
        cmp = compare_samples(base.samples_us, job.samples_us, min_effect=s.min_effect, seed=s.seed)
        leader.ratio, leader.ci_low, leader.ci_high, leader.verdict = cmp.ratio, cmp.ci_low, cmp.ci_high, cmp.verdict
        leader.median_us, leader.baseline_us = cmp.variant_median_us, cmp.baseline_median_us
        assert tuner.records is not None
        tuner.records.save_candidate(leader)
        k.baseline_us = cmp.baseline_median_us
        k.p_value = cmp.p_value
        if cmp.verdict == Verdict.FASTER:
            self.finish(leader, f"{leader.description}: {cmp.ratio:.3f}x [{cmp.ci_low:.3f}, {cmp.ci_high:.3f}]")
        else:
            self.finish(None, f"no better configuration found: the best ({leader.description}) measured "
                              f"{cmp.ratio:.3f}x [{cmp.ci_low:.3f}, {cmp.ci_high:.3f}], verdict {cmp.verdict}")

    def _remeasure(self, tried: list[Tried], secs: float, stage: str, iters: int = 2 * STAGE_ITERS) -> None:
        session = self.session
        for t in tried:
            self._ensure_job(t)
        ids = [t.job_id for t in tried if t.job_id is not None]
        session.rerun([self.base_id, *ids], iters=iters, min_time_s=secs)
        session.wait()
        base_med = _median(session.jobs[self.base_id])
        assert self.tuner.records is not None
        for t in tried:
            r = session.jobs[t.job_id or ""]
            if r.status in (INTERRUPTED, CANCELLED):   # stopped: keep what the candidate had
                continue
            t.stage = stage
            classify(t, r, base_med)
            self.tuner.records.save_candidate(t)

    def _ensure_job(self, t: Tried) -> None:
        """A candidate screened by the tune being resumed has no job in this session yet: add its variant
        again (its kernel is a cache hit)."""
        session = self.session
        if t.job_id is not None and t.job_id in session.jobs:
            return
        specs: tuple[str, ...] = ()
        if t.spec:
            path = Path(self.tuner.settings.out_dir) / "candidates" / t.func_name / f"{t.key}.mlir"
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, t.spec)
            specs = (str(path.resolve()),)
        form = t.params.get("formulation")
        variant = Variant(name=t.variant, tuning_specs=specs, flags=tuple(t.params.get("flags") or ()),
                          kernels=(t.func_name,), kernel_formulations=((t.func_name, form),) if form else ())
        base = session.jobs[self.base_id]
        jobs = [j for j in session.add_variant(variant) if j.command == base.command]
        t.job_id = jobs[0].job_id if jobs else None
        t.run_id = session.run_id

    def finish(self, winner: Tried | None, message: str) -> None:
        k = self.k
        k.message = message
        if winner is None:
            k.status = NO_BETTER
            k.best_key = None
            best = self.best()
            k.verdict = best.verdict if best is not None and best.stage == "final" else None
            if k.baseline_us is None:
                k.baseline_us = _median(self.session.jobs[self.base_id])
        else:
            k.status = IMPROVED
            k.best_key, k.best_us, k.ratio = winner.key, winner.median_us, winner.ratio
            k.ci_low, k.ci_high, k.verdict = winner.ci_low, winner.ci_high, winner.verdict
        self.update("done", message)


def classify(t: Tried, r: JobResult, base_median: float | None) -> None:
    """What the candidate's job came to: measured (with its ratio to the baseline beside it), or why not."""
    t.compile_seconds = r.compile.seconds if r.compile is not None else None
    t.artifact_key = binary_hash(r)
    t.median_us = t.ratio = None
    if r.status != DONE or r.stats is None:
        compile_error = r.compile is not None and r.compile.error
        t.status = COMPILE_FAILED if compile_error or r.compile is None else FAILED
        t.error = first_line(r.error or (r.compile.error if r.compile else "") or r.status)
        return
    if r.compile is not None and r.compile.spec_applied is False:
        t.status, t.error = NOT_APPLIED, "the spec matched no op (not applied)"
        return
    t.median_us = r.stats.median_us   # kept for a wrong kernel too: "fast but wrong" is worth knowing
    t.baseline_us = base_median
    t.ratio = t.median_us / base_median if base_median else None
    if r.numerics is not None and r.numerics.verdict == "fail":
        t.status, t.error = NUMERICS_FAILED, "numerics differ from the baseline's outputs"
        return
    t.status, t.error = MEASURED, None


def binary_hash(r: JobResult | None) -> str | None:
    """The digest of the job's compiled binary (from its cache entry's meta.json): two configurations that
    build the same binary are one candidate."""
    if r is None or r.compile is None or not r.compile.artifact:
        return None
    try:
        meta = json.loads((Path(r.compile.artifact).parent / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    sha = meta.get("vmfb_sha256")
    return str(sha)[:16] if sha else None


def _tell(study: Any, trial: Any, t: Tried | None) -> None:
    import optuna

    if t is not None and t.ratio is not None and t.status in (MEASURED, DUPLICATE):
        study.tell(trial, float(t.ratio))
    else:
        study.tell(trial, state=optuna.trial.TrialState.FAIL)


def _ratio_key(t: Tried) -> float:
    return float(t.ratio) if t.ok and t.ratio is not None else float("inf")


def _median(r: JobResult | None) -> float | None:
    return r.stats.median_us if r is not None and r.stats is not None else None


def _configs_dir(r: JobResult | None) -> str:
    if r is None or r.compile is None or not r.compile.artifact:
        return ""
    return str(Path(r.compile.artifact).parent / "configs")


def _root_summary(root: RootOp | None) -> dict[str, Any] | None:
    if root is None:
        return None
    return {"dispatch": root.dispatch, "op": root.op_name, "kind": root.kind, "bounds": list(root.bounds),
            "types": list(root.elem_types), "pipeline": root.pipeline, "cpu": root.target_cpu,
            "tiles": {k: list(v) for k, v in root.tiles.items()}}
