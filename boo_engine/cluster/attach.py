"""A session's use of a Ray cluster: joined once, its measuring slots as benchmark workers, its CPUs as the
compile pool (session/core.py asks for both when `SessionConfig.ray_address` is set)."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import events as ev
from ..config import SessionConfig
from ..targets import Target
from . import ClusterError
from .connect import Cluster

if TYPE_CHECKING:
    from ..bench.messages import MeasuringWorker
    from ..compile.cache import KernelCache
    from ..compile.interface import CompilingPool


def attach(config: SessionConfig, target: Target, cache: KernelCache, emit: Callable[[ev.Event], None]
           ) -> tuple[Cluster, Callable[[], CompilingPool], list[MeasuringWorker]]:
    """(the cluster, a factory of its compile pool, its benchmark workers). Raises ClusterError (one line) when
    ray is missing, no cluster answers, or no node has the target's device."""
    from .compiling import RayCompilePool
    from .measuring import RayBenchWorker

    assert config.ray_address
    cluster = Cluster(config.ray_address)
    slots = cluster.slots(target.kind)
    if not slots:
        what = "CPU" if target.kind == "cpu" else f"{target.kind} GPU"
        raise ClusterError(f"no node of the Ray cluster at {config.ray_address} has a {what} to measure on")
    host_cpu = None
    if target.kind == "cpu":
        from ..hostcpu import host_cpu_identity

        host_cpu = host_cpu_identity()

    def warn(message: str) -> None:
        emit(ev.Log(level="warning", message=message))

    workers: list[MeasuringWorker] = [RayBenchWorker(cluster, s, threads=config.threads, host_cpu=host_cpu,
                                                     warn=warn) for s in slots]
    nodes = {s.node.label for s in slots}
    emit(ev.Log(level="info", message=f"Ray cluster at {config.ray_address}: compiling on its CPUs, measuring on "
                                      f"{len(slots)} device(s) of {len(nodes)} node(s)"))

    def pool() -> CompilingPool:
        return RayCompilePool(cluster, cache, timeout_s=config.compile_timeout_s)

    return cluster, pool, workers
