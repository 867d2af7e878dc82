"""A compile worker: a spawned process leading its own process group, taking one request at a time over a private
pipe (compile.messages) and answering each with one reply.

It does the export (torch.export holds the GIL ~150 ms the first time, which must never happen on a UI thread)
and runs iree-compile through compile.compiler_run, in a process group of its own, so a timeout kills compiler and
linker. Workers stay in the caller's SESSION (process groups, not setsid): with the kernel's autogroup scheduling
(on by default in most distributions) every session is its own scheduling group with an equal share of the CPU,
where the compilers' nice +5 would mean nothing next to the dashboard's UI thread.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing.connection
import multiprocessing.context
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import CompileError, VariantError
from ..process_setup import ignore_stop_signals, redirect_output_if_asked
from .build import compile_signature
from .cache import KernelCache
from .dump import dump_dispatches
from .messages import Compiled, CompileRequest, Dumped, DumpRequest, Failed, Reply, Request
from .procs import kill_tree
from .storage import CacheStoreError

COMPILE_NICENESS = 5


@dataclass
class PoolJob:
    """A request in the pool: queued, then on a worker (`Worker.job`) until its future is resolved."""

    request: Request
    #: the result: an Artifact for a CompileRequest, a list[Path] for a DumpRequest (submit / submit_dump say which)
    future: concurrent.futures.Future[Any]
    on_start: Callable[[], None] | None = None
    started: float = 0.0

    @property
    def func_name(self) -> str:
        return self.request.sig.func_name


class Worker:
    """One spawned worker process and the pool's end of its pipe; `job` is what it is working on (None: idle)."""

    def __init__(self, ctx: multiprocessing.context.SpawnContext, cache: KernelCache, timeout_s: float):
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=worker_main, args=(child, cache, timeout_s), daemon=True,
                                name="boo-compile-worker")
        self.proc.start()
        child.close()
        self.job: PoolJob | None = None

    def kill(self) -> None:
        # exitcode None: still running, or dead but not reaped, so the pid is still ours (a reaped pid may be
        # reused by an unrelated process)
        if self.proc.pid and self.proc.exitcode is None:
            kill_tree(self.proc.pid)  # the worker, its iree-compile and the compiler's linker
        self.proc.join(timeout=5)
        with contextlib.suppress(OSError):
            self.conn.close()


def handle(request: Request, cache: KernelCache, timeout_s: float) -> Reply:
    """Do one job; every failure becomes this job's Failed reply, never the worker's death."""
    sig = request.sig
    try:
        if isinstance(request, DumpRequest):
            files = dump_dispatches(sig, request.target, request.out_dir, request.variant, timeout_s=timeout_s)
            return Dumped(tuple(str(f) for f in files))
        art = compile_signature(sig, request.target, request.variant, cache=cache, timeout_s=timeout_s,
                                extra_flags=request.extra_flags)
        return Compiled(art)
    except CacheStoreError as e:
        return Failed(str(e), e.stderr, tuple(e.command), cache_root=e.root, cache_reason=e.reason)
    except CompileError as e:
        return Failed(str(e), e.stderr, tuple(e.command))
    except VariantError as e:
        if isinstance(request, DumpRequest):  # the dump folder holds edits: the user's problem, said as such
            return Failed(str(e), variant_error=True)
        return Failed(f"{sig.func_name}: {type(e).__name__}: {e}")
    except Exception as e:  # noqa: BLE001 - any failure is this job's failure, not the worker's
        return Failed(f"{sig.func_name}: {type(e).__name__}: {e}")


def _thread_only_tqdm_lock() -> None:
    """torch.export's FX interpreter makes a tqdm bar, and tqdm's first bar makes a multiprocessing RLock: a named
    semaphore registered with the resource tracker and still registered when the worker ended, so a run that
    compiled ended with `resource_tracker: There appear to be N leaked semaphore
    objects`. A worker has one thread that writes bars (and never shows them): a thread lock is enough."""
    with contextlib.suppress(ImportError):
        import threading

        from tqdm import tqdm

        tqdm.set_lock(threading.RLock())


def worker_main(conn: multiprocessing.connection.Connection, cache: KernelCache, timeout_s: float) -> None:
    ignore_stop_signals()
    redirect_output_if_asked()
    with contextlib.suppress(OSError):  # (if refused, a cancel still kills us: kill_tree signals pids too)
        os.setpgid(0, 0)  # own process group, same session (see the module docstring)
    # a background group writing to a terminal set to `stty tostop` would be stopped mid-compile
    signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        # Compiles are throughput work: the dashboard's UI thread (and, on GPU targets, the benchmark worker)
        # must win the CPU when they compete. The compiler children inherit this.
        os.nice(COMPILE_NICENESS)
    _thread_only_tqdm_lock()
    from . import turbine

    turbine.EXPORT_IN_PROCESS = True   # a process made for compiling: BOO's export runs here
    with contextlib.suppress(Exception):  # pay the import cost (~1-2 s) before the first job arrives
        import torch.export  # noqa: F401
        from iree.compiler.extras import fx_importer  # noqa: F401
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if not isinstance(msg, (CompileRequest, DumpRequest)):
            return  # None: the pool asks us to exit
        reply = handle(msg, cache, timeout_s)
        try:
            conn.send(reply)
        except (OSError, ValueError):
            return
