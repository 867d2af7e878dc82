"""What a session settles before its first job: its target (`session_target`), the cluster it joins (`--ray`),
the tune winners its best column looks up first, the environment a run records, and the imports a front end with
a UI warms while it opens."""
from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import events as ev
from ..config import SessionConfig
from ..targets import Target, default_target, parse_target
from .state import SessionState

if TYPE_CHECKING:  # pragma: no cover
    from ..cluster.connect import Cluster
    from ..compile.cache import KernelCache
    from ..compile.interface import CompilingPool
    from ..store import Store
    from ..store.tuned import TunedLookup

def session_target(config: SessionConfig) -> Target:
    """The config's target (else a detected GPU, else the cpu), building the config's way (`build`: BOO's or
    ours); compiling with IREE's plain defaults when the config turns the per-op defaults off (what tune
    --defaults measures against)."""
    target = parse_target(config.target) if config.target else default_target()
    return dataclasses.replace(target, build=config.build, per_op_defaults=target.per_op_defaults
                               and config.per_op_defaults)


def tuned_lookup(target: Target, store: Store) -> TunedLookup | None:
    """The best column's first source, a finished tune's winners measured on this machine (store/tuned.py): cpu
    targets only (GPU tunes substitute dispatches, not carried over)."""
    if target.kind != "cpu":
        return None
    from ..store.tuned import TunedLookup

    return TunedLookup(store=store)


def join_cluster(config: SessionConfig, target: Target, cache: KernelCache, state: SessionState,
                 tmp: tempfile.TemporaryDirectory[str]
                 ) -> tuple[Cluster | None, Callable[[], CompilingPool] | None, list[Any] | None]:
    """--ray: (the cluster, a factory of its compile pool, its benchmark workers); (None, None, None) without
    it. A cluster that cannot be used raises its one-line ClusterError (the session's scratch folder removed)."""
    if not config.ray_address:
        return None, None, None
    from ..cluster.attach import attach

    try:
        return attach(config, target, cache, state.emit)
    except BaseException:
        tmp.cleanup()
        raise


def run_environment(target: Target, cache: KernelCache, emit: Callable[[ev.Event], None],
                    cluster: Cluster | None = None) -> dict[str, Any]:
    """What a run records about where it ran (environment.py), with where its per-op flags come from; a damaged
    defaults table is said once through `emit` (the rules decide meanwhile)."""
    from ..cpu_defaults.machine import defaults_in_use
    from ..environment import collect_environment

    try:
        version = cache.compiler_version  # remembered in the cache per compiler build
    except Exception:  # noqa: BLE001 - the environment is best effort
        version = None
    defaults = defaults_in_use(target)
    jit = ptx_jit_notice(target)
    if jit:
        emit(ev.Log(level="info", message=jit))
    if defaults.get("warning"):
        emit(ev.Log(level="warning", message=str(defaults["warning"])))
    env = collect_environment(target.name, compiler_version=version, per_op_defaults=defaults)
    if cluster is not None:   # --ray: where the run's kernels were compiled and measured
        try:
            env["ray"] = cluster.describe()
        except Exception as e:  # noqa: BLE001 - the environment is best effort
            env["ray"] = {"address": cluster.address, "error": str(e)}
    return env


def ptx_jit_notice(target: Target) -> str | None:
    """The line saying that a cuda run's kernels are PTX JIT-compiled for a newer GPU than they were built for
    (an H100 runs sm_80 builds: IREE 3.13 cannot target sm_90); None when the GPU is the build's arch."""
    from ..targets import cuda_target, detect_gpu_archs

    if target.kind != "cuda":
        return None
    archs = detect_gpu_archs("cuda")
    if not archs or target.arch in archs:
        return None
    asked = cuda_target(archs[0])
    if asked.runs_on is not None:
        return asked.notice
    return (f"this GPU is {archs[0]}; running {target.arch} PTX builds, which the CUDA driver JIT-compiles for it "
            "when each kernel loads")


def warm_imports() -> None:
    """Import now what a run would import lazily (compile pool, benchmark worker client, statistics, comparison,
    exports). Headless runs skip this to start fast; a front end with a UI calls it while it opens, so that no
    import holds the GIL (and freezes the UI) in the middle of a run."""
    import scipy.stats  # noqa: F401  (compare's Mann-Whitney U)

    from .. import compare, environment, exporters, variants  # noqa: F401
    from ..bench import reproducer, stats, worker  # noqa: F401
    from ..compile import cache, pool  # noqa: F401
