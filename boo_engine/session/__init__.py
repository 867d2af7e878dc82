"""The one orchestrator. A Session turns inputs (commands files, command strings) x variants x backends on one
target into jobs, compiles them in a process pool through the cache, measures them in a benchmark worker
process, checks numerics, stores every result and raw sample, and emits events for the front ends.

Threads: the caller's thread only queues work and reads state. A runner thread drives compiles and
measurements; compiles run in child processes and measurements in the benchmark worker process, so no export,
compile or measurement ever runs on the caller's (e.g. the UI's) thread. The store has its own writer thread.

CPU discipline: on the `cpu` target nothing else runs while a measurement runs: all compiles of a batch finish
before its first measurement, and the measurements run one at a time.

Reading order, each module on its own:
    plan.py        inputs -> jobs (entries, job ids, entries x variants x backends); no threads, no I/O
    state.py       what the threads share, under one lock; events out to the listener
    recording.py   the run and its results in the store
    compiling.py   the compile stage (pool, cache hits, spec-applied check)
    measuring.py   the measure stage (benchmark worker, interleaved rounds, sample streaming)
    finalize.py    stats, noise, reproducer, spec/numerics errors, DONE; the command's verdicts
    runner.py      the runner thread: batches and groups through the stages
    core.py        the `Session` facade that builds and drives the above
"""
from __future__ import annotations

from ..config import SessionConfig
from .core import Session
from .setup import warm_imports
from .state import Listener

__all__ = ["Listener", "Session", "SessionConfig", "warm_imports"]
