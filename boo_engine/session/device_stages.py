"""Measuring on several devices (`--devices 0,1`): one measure stage, with its own benchmark worker process, per
device, and the rule that spreads a batch over them.

The rule (`command_groups` + `spread`), the same for one device as for eight:
- the unit handed to a device is a command's group: every job of one command (its variants and the torch
  reference) is measured on ONE device, interleaved there exactly as on a single device, so every ratio vs the
  baseline (and every numerics check against the baseline's outputs) compares measurements of the same device;
- groups are taken in queue order by whichever device is free first (a tie goes to the device listed first):
  different commands are measured at the same time on different devices. The ratios (and so their geomean)
  stay within one device; what adds up times ACROSS commands (a model line's sum of calls x median) mixes
  devices: spread over identical GPUs.

On the cpu target there is one device, "cpu", and the runner's thread measures its groups in order (no thread
of its own). With several devices each gets a `boo-measure-<device>` thread; the runner waits for all of them
before the batch is over. A worker that crashes or hangs fails that job and is replaced on its device only
(bench/worker.py); an unexpected error in one device's thread fails that group and the device goes on with the
next: the other devices never notice.
"""
from __future__ import annotations

import contextlib
import functools
import threading
from collections import deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from .. import events as ev
from ..bench.devices import default_devices
from ..config import SessionConfig
from ..targets import Target
from .measuring import GroupMoved, MeasureStage
from .recording import RunRecorder
from .state import SessionState

if TYPE_CHECKING:
    from ..bench.messages import MeasuringWorker

T = TypeVar("T")


def command_groups(job_ids: Sequence[str], command_of: Mapping[str, Hashable]) -> list[list[str]]:
    """The batch's units of work, in queue order of their first job: the jobs of one command (variants and
    backends together) form one group, measured interleaved on one device."""
    groups: dict[Hashable, list[str]] = {}
    for job_id in job_ids:
        groups.setdefault(command_of[job_id], []).append(job_id)
    return list(groups.values())


def spread(units: Sequence[T], devices: Sequence[str],
           durations: Sequence[float] | None = None) -> dict[str, list[T]]:
    """Which device measures which unit, when a free device takes the next unit in order (what the runner does
    as the measurements end): with equal `durations` (the default) round robin over `devices`; otherwise the
    device that frees up first takes the next unit, a tie going to the device listed first."""
    if not devices:
        raise ValueError("no device to measure on")
    free_at = dict.fromkeys(devices, 0.0)
    taken: dict[str, list[T]] = {d: [] for d in devices}
    for i, unit in enumerate(units):
        device = min(devices, key=lambda d: free_at[d])   # min() keeps the first of equal keys
        taken[device].append(unit)
        free_at[device] += durations[i] if durations is not None else 1.0
    return taken


class DeviceStages:
    """The measure stages of a session, one per device, in the order the devices were given."""

    def __init__(self, state: SessionState, recorder: RunRecorder, config: SessionConfig, target: Target,
                 scratch_dir: str, worker: MeasuringWorker | None = None,
                 workers: Sequence[MeasuringWorker] | None = None) -> None:
        """`worker`: one the caller started early, used for its device when that is one of the session's
        (else closed). `workers`: the session's measuring places made elsewhere (a Ray cluster's slots:
        cluster/measuring.py), one stage each, instead of `config.devices`."""
        self._state = state
        self._moved: set[int] = set()       # groups already moved once off a lost worker (by id)
        if workers:
            if worker is not None:
                with contextlib.suppress(Exception):
                    worker.close()
            self.stages = [MeasureStage(state, recorder, config, target, scratch_dir, w, device=w.device)
                           for w in workers]
            for stage in self.stages:
                stage.move_lost = functools.partial(self._may_move, stage)
            return
        devices = tuple(config.devices) or default_devices(target.kind)
        handed = worker if worker is not None and worker.device in devices else None
        if worker is not None and handed is None:
            with contextlib.suppress(Exception):
                worker.close()
        self.stages = [
            MeasureStage(state, recorder, config, target, scratch_dir,
                         handed if handed is not None and getattr(handed, "device", devices[0]) == d else None,
                         device=d)
            for d in dict.fromkeys(devices)
        ]

    @property
    def devices(self) -> list[str]:
        return [s.device for s in self.stages]

    def ensure_worker(self) -> None:
        """Start every device's worker now (their torch imports overlap the compiles)."""
        for stage in self.stages:
            worker = stage.ensure_worker()
            if worker.remote:   # a Ray worker starts its actor when asked (in the background)
                threading.Thread(target=_quietly(worker.start), name="boo-ray-start", daemon=True).start()

    def close(self) -> None:
        for stage in self.stages:
            stage.close()

    def fresh_workers(self) -> bool:
        """Every device's next measurement in a new worker process (MeasureStage.fresh_worker); False when one
        could not be replaced (a Ray node's)."""
        return all([stage.fresh_worker() for stage in self.stages])

    def kill_now(self) -> None:
        """SIGKILL every worker process, taking no lock (see Session.kill_children)."""
        for stage in self.stages:
            stage.kill_now()

    def _may_move(self, lost: MeasureStage, group: list[str], why: str) -> bool:
        """`lost`'s worker died mid-group (a Ray actor): may the group move, once, to a device of another node?"""
        others = [s for s in self.stages if s is not lost and s.node != lost.node]
        if id(group) in self._moved or not others:
            return False
        self._moved.add(id(group))
        func = self._state.jobs[group[0]].func_name
        self._state.emit(ev.Log(level="warning", message=f"{func}: {why}; measured again on another node"))
        return True

    def run(self, groups: Sequence[list[str]], work: Callable[[MeasureStage, list[str]], None],
            failed: Callable[[list[str], BaseException], None]) -> None:
        """Measure `groups` by the rule above: `work(stage, group)` for each, on the stage's device; returns when
        every group is done or the session stops. An exception of one group goes to `failed(group, error)` and its
        device takes the next group. A group whose worker was lost and may move (`GroupMoved`) goes back to the
        front of the queue, for any device but the one that lost it."""
        queue = GroupQueue(groups, self._state)

        def loop(stage: MeasureStage) -> None:
            while (group := queue.take(stage)) is not None:
                try:
                    work(stage, group)
                except GroupMoved:
                    queue.give_back(group, stage)
                except Exception as e:  # noqa: BLE001 - one group's bug must not stop this device or the others
                    failed(group, e)
                finally:
                    queue.done(stage)

        if len(self.stages) == 1:
            loop(self.stages[0])
            return
        threads = [threading.Thread(target=loop, args=(stage,), name=f"boo-measure-{stage.device}", daemon=True)
                   for stage in self.stages]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


class GroupQueue:
    """The groups waiting for a device: each goes to exactly one; a group a device lost (`GroupMoved`) goes back
    to the front, for any device but that one. `take` waits while another device may still give one back."""

    def __init__(self, groups: Sequence[list[str]], state: SessionState) -> None:
        self._pending: deque[list[str]] = deque(groups)
        self._avoid: dict[int, set[int]] = {}          # group id -> stages that lost it
        self._busy: set[int] = set()
        self._cond = threading.Condition()
        self._state = state

    def take(self, stage: MeasureStage) -> list[str] | None:
        """The next group `stage` may measure; None when there is none left for it or the session stopped."""
        state = self._state
        with self._cond:
            while not state.stop.is_set() and state.halted is None:
                for group in self._pending:
                    if id(stage) not in self._avoid.get(id(group), ()):
                        self._pending.remove(group)
                        self._busy.add(id(stage))
                        return group
                if not self._busy:            # nothing pending this device can take, and nobody can add any
                    self._cond.notify_all()
                    return None
                self._cond.wait(0.2)
            return None

    def give_back(self, group: list[str], stage: MeasureStage) -> None:
        with self._cond:
            self._avoid.setdefault(id(group), set()).add(id(stage))
            self._pending.appendleft(group)

    def done(self, stage: MeasureStage) -> None:
        with self._cond:
            self._busy.discard(id(stage))
            self._cond.notify_all()


def _quietly(fn: Callable[[], object]) -> Callable[[], None]:
    """`fn` whose failure is left for the first measurement to report."""
    def call() -> None:
        with contextlib.suppress(Exception):
            fn()
    return call
