"""A tune for a target this machine cannot run (e.g. `--target hip:gfx942` on a CPU-only host): the candidates
are generated and compiled, not measured, so a user can fill a kernel cache here and measure where the GPU is.

Per kernel: the baseline is compiled, its root op read, and `budget` candidates proposed by the same seeded
sampler the real search starts with (optuna's TPE, whose first proposals are its seeded random start-up
trials), plus the kernel's formulations; each is compiled in the pool and stored with its compile status. A
later `boo-tui tune ... --target T --cache-dir <that cache>` on the machine with the GPU proposes the same
start-up candidates and finds them compiled. No verdict is given: nothing was measured.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import BooError, first_line
from ..variants import spec_applied
from ..variants.root_op import RootOp, read_root
from .records import COMPILE_FAILED, KERNEL_FAILED, NOT_APPLIED, Tried, TunedKernel
from .space import Candidate, GlobalChoice, SearchSpace, global_choices, new_study, suggest, tile_space

if TYPE_CHECKING:
    from ..commands import Command
    from .context import TuneContext

#: a candidate compiled (not measured: the target's device is not on this machine)
COMPILED = "compiled"
#: a kernel whose candidates were compiled only
COMPILED_ONLY = "compiled_only"


def space_for(root: RootOp, target_kind: str) -> SearchSpace | None:
    if target_kind == "cpu":
        return tile_space(root)
    from .gpu_space import gpu_space

    return gpu_space(root)


def propose(space: SearchSpace, func_name: str, choice: GlobalChoice, budget: int, seed: int,
            batch: int = 8) -> list[Candidate]:
    """The candidates the live tile search (tune/kernel.py `tile_search`) proposes first, asked the same way: its
    first batch of min(`batch`, `budget`) trials is asked before any is told (a configuration that breaks a
    constraint is told PRUNED at once and asks again, up to the live search's 3 x batch), so the seeded
    sampler draws the same start-up proposals. A live tune on the GPU box with the same seed, budget and batch
    (budget <= batch) then proposes exactly these and finds every one compiled; a later batch depends on what
    was measured and cannot be compiled ahead. Duplicates are proposed once."""
    import optuna

    study = new_study(seed, budget)
    out: dict[str, Candidate] = {}
    proposed = stale = 0
    while proposed < min(batch, budget) and stale < 3 * batch:
        trial = study.ask()
        cand = space.candidate(func_name, choice, suggest(trial, space.choices))
        if isinstance(cand, str):
            stale += 1
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            continue
        out.setdefault(cand.key, cand)
        proposed += 1
    return list(out.values())


def compile_only(tuner: TuneContext, commands: Sequence[tuple[str, str, Command]]) -> dict[str, TunedKernel]:
    """Generate and compile every kernel's candidates for a target this machine cannot run."""
    from ..compile.cache import open_cache
    from ..compile.pool import CompilePool
    from ..targets import parse_target

    s = tuner.settings
    target = parse_target(s.target or "cpu")
    out: dict[str, TunedKernel] = {}
    with CompilePool(cache=open_cache(s.cache_dir), workers=s.compile_workers) as pool:
        for func, command_text, command in commands:
            if tuner.stopped:
                break
            sig = command.signature
            k = TunedKernel(func_name=func, command=command_text)
            try:
                base = pool.submit(sig, target).result()
            except BooError as e:
                k.status, k.message = KERNEL_FAILED, f"baseline failed to compile: {first_line(str(e))}"
                tuner.records.save_kernel(k)
                out[func] = k
                continue
            forms = tuple(getattr(sig, "formulations", lambda: ())())
            cands = [Candidate(func, ch) for ch in global_choices(sig, target, forms)]
            root = read_root(base.configs_dir)
            space = space_for(root, target.kind) if root is not None else None
            if space is not None:
                cands += propose(space, func, GlobalChoice("default"), max(0, s.budget - len(cands)), s.seed,
                                 s.batch)
            futures = []
            for c in cands:
                variant, text = tuner.variant_for(c)
                futures.append((c, variant, text, pool.submit(sig, target, variant)))
            for c, variant, text, fut in futures:
                t = Tried(func_name=func, key=c.key, params=c.params, variant=variant.name, description=c.describe(),
                          spec=text, stage="compile-only", status=COMPILED)
                try:
                    art = fut.result()
                    t.compile_seconds, t.artifact_key = art.compile_seconds, art.key[:16]
                    if variant.tuning_specs and not spec_applied(art.configs_dir, base.configs_dir,
                                                                 variant.tuning_specs).applied:
                        t.status, t.error = NOT_APPLIED, "the spec matched no op (not applied)"
                    elif variant.substitutions and not _marked(art.configs_dir):   # cuda: a substituted dispatch
                        t.status, t.error = NOT_APPLIED, "the substituted dispatch lost its configuration"
                except BooError as e:
                    t.status, t.error = COMPILE_FAILED, first_line(str(e))
                tuner.records.save_candidate(t)
                k.tried.append(t)
            built = sum(1 for t in k.tried if t.status == COMPILED)
            k.status, k.candidates = COMPILED_ONLY, len(k.tried)
            k.message = (f"{built} of {len(k.tried)} candidates compiled for {target.name} (no {target.kind} device "
                         f"here: measure them where it is, with the same --cache-dir)")
            if space is None:
                k.message += "; no tile space for this kernel's op on this target (flags and formulations only)"
            tuner.records.save_kernel(k)
            out[func] = k
    return out


def _marked(configs_dir: str) -> bool:
    from pathlib import Path

    from ..variants.common import SPEC_MARKER

    return any(SPEC_MARKER in p.read_text(errors="replace") for p in Path(configs_dir).glob("*.mlir"))
