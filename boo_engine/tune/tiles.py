"""The tile stage of one kernel's search: tile configurations proposed by optuna's TPE sampler `batch` at a time,
screened beside the baseline by the kernel's search (kernel.py), each ratio told back to the sampler.

The offline path (offline.py) asks the same sampler the same way, so the candidates it lists are the ones this
stage would try first.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from .events import TuneLog
from .records import COMPILE_FAILED, DUPLICATE, MEASURED, NOT_APPLIED, Tried, TunedKernel
from .space import Candidate, GlobalChoice, SearchSpace, new_study, suggest

if TYPE_CHECKING:
    import optuna

    from .context import TuneContext


class Screening(Protocol):
    """What the tile stage needs of a kernel's search (kernel.py's KernelSearch)."""

    ctx: TuneContext
    k: TunedKernel
    tried_keys: set[str]

    def screen(self, cands: Sequence[Candidate], stage: str) -> list[Tried]: ...


def tile_search(search: Screening, choice: GlobalChoice, space: SearchSpace, budget: int) -> None:
    """Propose up to `budget` configurations under `choice` and screen them; stop early when the sampler keeps
    proposing configurations already tried or impossible (3 batches' worth), or when no configuration can take
    effect (the compiler's rewrite of the root op drops the spec)."""
    batch = search.ctx.settings.batch
    study = new_study(search.ctx.settings.seed, budget)
    proposed = stale = 0
    while proposed < budget and not search.ctx.out_of_time() and stale < 3 * batch:
        trials, stale = _propose(search, study, choice, space, min(batch, budget - proposed), stale)
        if not trials:
            break
        proposed += len(trials)
        tried = {t.key: t for t in search.screen([c for _, c in trials], stage="tiles")}
        for trial, cand in trials:
            _tell(study, trial, tried.get(cand.key))
        built = [t for t in tried.values() if t.status != COMPILE_FAILED]
        if built and all(t.status == NOT_APPLIED for t in built):
            # seen on batch-1 convolutions: a later rewrite of the op drops what the spec set, so no tile
            # configuration can take effect; the rest of the budget would be spent on the default kernel
            search.ctx.emit(TuneLog(level="warning", message=(
                f"{search.k.func_name}: no tile configuration survives the compiler's rewrite of "
                f"{space.root.op_name} (spec not applied); tile search stopped")))
            break


def _propose(search: Screening, study: optuna.Study, choice: GlobalChoice, space: SearchSpace, want: int,
             stale: int) -> tuple[list[tuple[optuna.trial.Trial, Candidate]], int]:
    """Up to `want` new candidates from the sampler, and the stale count: a proposal that breaks a constraint of
    the target (shared memory, divisibility) is pruned, one already tried is told its result again."""
    import optuna

    batch = search.ctx.settings.batch
    trials: list[tuple[optuna.trial.Trial, Candidate]] = []
    while len(trials) < want and stale < 3 * batch:
        trial = study.ask()
        cand = space.candidate(search.k.func_name, choice, suggest(trial, space.choices))
        if isinstance(cand, str):
            stale += 1
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            continue
        if cand.key in search.tried_keys:
            stale += 1
            _tell(study, trial, next((t for t in search.k.tried if t.key == cand.key), None))
            continue
        trials.append((trial, cand))
    return trials, stale


def _tell(study: optuna.Study, trial: optuna.trial.Trial, t: Tried | None) -> None:
    import optuna

    if t is not None and t.ratio is not None and t.status in (MEASURED, DUPLICATE):
        study.tell(trial, float(t.ratio))
    else:
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
