"""`CompilingPool`: what a session's compile stage (session/compiling.py) uses of a compile pool, written down.

Two pools have it: the local `compile.pool.CompilePool` (worker processes on this host) and a Ray cluster's
`cluster.compiling.RayCompilePool` (tasks on the cluster's CPUs). The stage is handed one by a factory and never
asks which it has; what only the local pool does (dispatch dumps: `CompilePool.submit_dump`) is not part of it.
"""
from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..ops.base import OpSignature
    from ..targets import Target
    from ..variants import Variant
    from .artifact import Artifact


class CompilingPool(Protocol):
    def submit(self, sig: OpSignature, target: Target | str = ..., variant: Variant = ..., *,
               extra_flags: Sequence[str] = (), on_start: Callable[[], None] | None = None
               ) -> concurrent.futures.Future[Artifact]:
        """Queue one compile of `sig` for `target` as `variant` builds it; the future's result is the
        compile.artifact.Artifact, its exception a CompileError (CompileCancelled when cancelled). `on_start`: called
        when the compile starts (at once where the pool cannot tell)."""
        ...

    def cancel_all(self) -> None:
        """Fail every queued and running compile with CompileCancelled (running compilers are stopped)."""
        ...

    def shutdown(self, wait: bool = True, *, cancel: bool = False) -> None:
        """Take no more compiles; with `cancel` abandon the queued and running ones, else (`wait`) finish them."""
        ...

    def kill_now(self) -> None:
        """Last resort (a second Ctrl-C, just before the process exits): stop every compile at once, taking no
        lock."""
        ...


if TYPE_CHECKING:   # both pools have the interface (mypy says so here the day one of them drifts from it)
    from ..cluster.compiling import RayCompilePool
    from .pool import CompilePool

    def _both(local: CompilePool, ray: RayCompilePool) -> tuple[CompilingPool, CompilingPool]:
        return local, ray
