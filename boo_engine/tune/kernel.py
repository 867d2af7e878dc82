"""The search of ONE kernel (the stages of search.py's docstring): its candidates screened beside the
baseline, the tile search, successive halving and the final; and how a measured job becomes a candidate's
outcome (`classify`)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..compare import Comparison, Verdict, compare_measured, next_run_interval
from ..compile.artifact import entry_binary_digest, entry_configs_dir
from ..errors import BooError, first_line
from ..results import CANCELLED, DONE, INTERRUPTED, JobResult
from ..variants import Variant
from .events import TuneLog, TuneUpdate
from .known import add_known_job, against_known
from .records import (
    COMPILE_FAILED,
    DUPLICATE,
    FAILED,
    IMPROVED,
    MEASURED,
    NO_BETTER,
    NOT_APPLIED,
    NUMERICS_FAILED,
    Tried,
    TunedKernel,
)
from .space import Candidate, GlobalChoice, SearchSpace
from .tiles import tile_search

if TYPE_CHECKING:
    from ..session import Session
    from .context import TuneContext

#: samples per job per stage at least (with the stage's minimum time): one per interleaving round
STAGE_ITERS = 5
#: the baseline moving more than this between a search's start and its verification is reported (IREE's tuner: 3%)
DRIFT_LIMIT = 0.03


def _ci(c: Comparison) -> str:
    return f"{c.ratio:.3f}x [{c.ci_low:.3f}, {c.ci_high:.3f}]"


class KernelSearch:
    """The search state of one kernel (its tried candidates, its jobs) and the stages that use it."""

    def __init__(self, ctx: TuneContext, kernel: TunedKernel, base_id: str, index: int, total: int,
                 known: dict[str, Tried]) -> None:
        self.ctx = ctx
        self.k = kernel
        self.base_id = base_id
        self.index = index
        self.total = total
        self.known = known   # from the tune being resumed
        self.tried_keys: set[str] = set()
        #: the baseline's median when this kernel's search began: the verification measures it again (drift)
        self.base_start_us = ctx.session.jobs[base_id].median_us

    @property
    def session(self) -> Session:
        return self.ctx.session

    def best(self) -> Tried | None:
        ranked = self.ranked()
        return ranked[0] if ranked else None

    def ranked(self) -> list[Tried]:
        return sorted((t for t in self.k.tried if t.ok), key=lambda t: float(t.ratio or 0))

    def update(self, stage: str, message: str = "") -> None:
        tried = self.k.tried
        best = self.best()
        self.ctx.emit(TuneUpdate(
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
        batch = self.ctx.settings.batch
        for i in range(0, len(fresh), batch):
            if self.ctx.out_of_time():
                break
            out += self.measure(fresh[i:i + batch], stage)
        return out

    def measure(self, cands: Sequence[Candidate], stage: str) -> list[Tried]:
        tuner, session = self.ctx, self.session
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
        if not self._measure([self.base_id] + [e[3] for e in entries], STAGE_ITERS, tuner.settings.screen_s):
            return []
        base_med = session.jobs[self.base_id].median_us
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

    def tile_search(self, choice: GlobalChoice, space: SearchSpace, budget: int) -> None:
        """The tile stage (tiles.py): configurations proposed by optuna's TPE sampler, screened here."""
        tile_search(self, choice, space, budget)

    # ---- successive halving and the final ---------------------------------------------------------------
    def narrow(self) -> None:
        """Halve the best screened candidates over longer, interleaved measurements, then put the last one
        against the baseline; decide the kernel's outcome."""
        tuner, session = self.ctx, self.session
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
        cmp = compare_measured(base, job, paired=True, min_effect=s.min_effect)   # measured interleaved
        self._record_final(leader, cmp)
        if cmp.verdict != Verdict.FASTER:
            self.finish(None, f"no better configuration found: the best ({leader.description}) measured "
                              f"{_ci(cmp)}, verdict {cmp.verdict}")
            return
        self._verify(leader, cmp)

    def _record_final(self, leader: Tried, cmp: Comparison) -> None:
        leader.ratio, leader.ci_low, leader.ci_high, leader.verdict = cmp.ratio, cmp.ci_low, cmp.ci_high, cmp.verdict
        leader.median_us, leader.baseline_us = cmp.variant_median_us, cmp.baseline_median_us
        self.ctx.records.save_candidate(leader)
        self.k.baseline_us = cmp.baseline_median_us
        self.k.p_value = cmp.p_value

    def _verify(self, leader: Tried, final: Comparison) -> None:
        """The winner of the final, measured again against the baseline in a NEW benchmark process (another
        placement of everything, as the next session that uses tuned.toml will have): it is emitted only if it
        is still faster there, with the ratio measured there. The baseline, measured at the search's start and
        again here, tells how far the machine drifted meanwhile (the IREE tuner flags more than 3%)."""
        s, session = self.ctx.settings, self.session
        self.update("verify", f"{leader.description} against the baseline and the best known kernel again, in a "
                              f"new benchmark process")
        known_id = add_known_job(session, self.k.func_name, self.k.command, self.index)
        ids = [self.base_id, leader.job_id or "", *([known_id] if known_id else [])]
        fresh = self._measure(ids, 4 * STAGE_ITERS, s.final_s, fresh=True)
        if fresh is False or self.ctx.stopped:
            self.finish(None, "stopped before the winner was verified")
            return
        base, job = session.jobs[self.base_id], session.jobs[leader.job_id or ""]
        if base.status != DONE or job.status != DONE or not job.samples_us:
            self.finish(None, f"no better configuration found: the verification of {leader.description} "
                              f"ended {job.status}")
            return
        v = compare_measured(base, job, paired=True, min_effect=s.min_effect)
        known = session.jobs[known_id] if known_id else None
        if known is not None and known.status == DONE and known.samples_us:
            emit, note = against_known(compare_measured(known, job, paired=True, min_effect=s.min_effect))
        else:
            emit, note = against_known(None, "not measured (no best column of its own on this target)" if known is None
                                       else f"{known.status}: {known.error or 'no samples'}")
        self._record_final(leader, v)
        drift = drift_note(self.base_start_us, base.median_us)
        if drift:
            self.ctx.emit(TuneLog(level="warning", message=f"{self.k.func_name}: {drift[2:]}"))
        won, message = verified_outcome(v, final, leader.description, f"{'new' if fresh else 'reused'} process",
                                        emit, note, drift)
        self.finish(leader if won else None, message)

    def _remeasure(self, tried: list[Tried], secs: float, stage: str, iters: int = 2 * STAGE_ITERS) -> None:
        session = self.session
        for t in tried:
            self._ensure_job(t)
        ids = [t.job_id for t in tried if t.job_id is not None]
        if not self._measure([self.base_id, *ids], iters, secs):
            return
        base_med = session.jobs[self.base_id].median_us
        for t in tried:
            r = session.jobs[t.job_id or ""]
            if r.status in (INTERRUPTED, CANCELLED):   # stopped: keep what the candidate had
                continue
            t.stage = stage
            classify(t, r, base_med)
            self.ctx.records.save_candidate(t)

    def _measure(self, job_ids: list[str], iters: int, secs: float, *, fresh: bool = False) -> bool | None:
        """Measure the jobs (again) in one interleaved batch (`fresh`: in a new worker process); False when the
        tune was stopped; with `fresh`, None when the worker could not be replaced (a Ray node's)."""
        if self.ctx.stopped:
            return False
        try:
            renewed = self.session.rerun(job_ids, iters=iters, min_time_s=secs, fresh=fresh)
        except BooError:
            if self.ctx.stopped:   # stopped between the check and the call
                return False
            raise
        self.session.wait()
        measured = not self.ctx.stopped or any(
            self.session.jobs[j].status not in (INTERRUPTED, CANCELLED) for j in job_ids)
        return measured and (renewed or not fresh or None)

    def _ensure_job(self, t: Tried) -> None:
        """A candidate screened by the tune being resumed has no job in this session yet: add its variant
        again (its kernel is a cache hit)."""
        session = self.session
        if t.job_id is not None and t.job_id in session.jobs:
            return
        root = t.params.get("root")
        variant = self.ctx.candidate_variant(t.func_name, t.key, t.spec, t.params.get("flags") or (),
                                               t.params.get("formulation"), root.get("dispatch") if root else None)
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
                k.baseline_us = self.session.jobs[self.base_id].median_us
        else:
            k.status = IMPROVED
            k.best_key, k.best_us, k.ratio = winner.key, winner.median_us, winner.ratio
            k.ci_low, k.ci_high, k.verdict = winner.ci_low, winner.ci_high, winner.verdict
        self.update("done", message)


def drift_note(start_us: float | None, now_us: float | None) -> str:
    """"; the baseline drifted ..." when the baseline moved more than DRIFT_LIMIT since the search began, else ""."""
    if not (start_us and now_us) or abs(now_us / start_us - 1.0) <= DRIFT_LIMIT:
        return ""
    return f"; the baseline drifted {now_us / start_us:.3f}x since the search began ({start_us:.1f} -> {now_us:.1f} us)"


def verified_outcome(v: Comparison, final: Comparison, description: str, where: str, emit: bool, note: str,
                     drift: str) -> tuple[bool, str]:
    """(the leader wins, the kernel's message) from its verification `v` against the plain build in a `where`: a
    winner when faster there, its next-run interval below 1, not slower than the best known (`against_known`'s)."""
    lo, hi = next_run_interval(v.ratio, v.ci_low, v.ci_high)
    if v.verdict == Verdict.FASTER and hi < 1.0 and not emit:
        return False, (f"no better configuration found: {description} is {_ci(v)} of the plain build in a {where} "
                       f"{note}{drift}")
    if v.verdict == Verdict.FASTER and hi < 1.0:
        return True, (f"{description}: {_ci(v)}, verified in a {where}; a new session: [{lo:.3f}, {hi:.3f}] (the "
                      f"final said {_ci(final)}){note}{drift}")
    if v.verdict == Verdict.FASTER:   # faster here, but by less than a new session may move it
        return False, (f"no better configuration found: {description} measured {_ci(v)} in a {where}, too small "
                       f"to hold in a new session ([{lo:.3f}, {hi:.3f}] reaches 1){drift}")
    return False, (f"no better configuration found: {description} measured {_ci(final)} in the final but {_ci(v)} "
                   f"({v.verdict}) in a {where}{drift}")


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
    if r.numerics is not None and r.numerics.failed:
        t.status, t.error = NUMERICS_FAILED, "numerics differ from the baseline's outputs"
        return
    t.status, t.error = MEASURED, None


def binary_hash(r: JobResult | None) -> str | None:
    """The digest of the job's compiled binary (from its cache entry's meta.json): two configurations that
    build the same binary are one candidate."""
    if r is None or r.compile is None or not r.compile.artifact:
        return None
    return entry_binary_digest(r.compile.artifact)


def _ratio_key(t: Tried) -> float:
    return float(t.ratio) if t.ok and t.ratio is not None else float("inf")





def configs_dir(r: JobResult | None) -> str:
    if r is None or r.compile is None or not r.compile.artifact:
        return ""
    return entry_configs_dir(r.compile.artifact)
