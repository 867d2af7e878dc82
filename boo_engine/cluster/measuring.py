"""`RayBenchWorker`: the local benchmark worker's interface (`run(spec, on_samples, cancel)`, `close`, `device`),
with the measurement made by a `remote.MeasureActor` on one node's device.

One per measuring slot (connect.Slot): for the cpu target one per node (its CPU is one device, and the session's
CPU discipline holds there: every compile of a batch ends before its first measurement, and one measurement runs
at a time per node), for GPU targets one per GPU (the actor holds a `GPU` resource; Ray sets the GPU it sees).

The actor starts at the first job (or `start()`, to overlap its torch import with the compiles), pinned to its
node. A kernel is sent once per actor, from this host's cache through Ray's object store, unless the node already
has it at the same path (a shared cache). Samples come back by polling as the actor takes them.

When the actor dies mid-job: the cluster gone is `ClusterLost` (the session stops the run as interrupted);
otherwise `WorkerLost`, naming the node, and the next job starts a fresh actor on the same node when it is
still up (the session may first move the job to another node: session/device_stages.py).
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from ..bench.messages import BenchOutcome, BenchSpec
from ..bench.worker import BenchCancelled, BenchFailed
from ..compile.cache import file_sha256
from ..errors import ClusterLost
from .connect import Cluster, Slot
from .remote import POLL_WAIT_S, ActorInfo, actor_class

#: a `remote.MeasureActor`'s Ray handle. Any: Ray 2.60 types an ActorHandle's methods as Never (its __getattr__),
#: so with ActorHandle[MeasureActor] mypy would read the code after each `actor.<method>.remote()` as unreachable
ActorRef = Any
#: how long one Ray call may take beyond its own wait before the node is suspected
CALL_TIMEOUT_S = 60.0
#: how long a new actor may take to start (its process, then its benchmark worker's torch import)
START_TIMEOUT_S = 300.0


class WorkerLost(BenchFailed):
    """The actor measuring on a node died (its process killed, its node gone): the job in hand failed."""

    def __init__(self, message: str, node: str, node_alive: bool) -> None:
        super().__init__(message)
        self.node = node
        self.node_alive = node_alive


class RayBenchWorker:
    """A Ray node's measuring actor, as a measure stage's worker (bench.messages.MeasuringWorker)."""

    remote = True

    def __init__(self, cluster: Cluster, slot: Slot, *, threads: int = 1, host_cpu: str | None = None,
                 warn: Callable[[str], None] | None = None) -> None:
        self.cluster = cluster
        self.slot = slot
        self.device = slot.device
        self.node = slot.node.label           # what results record
        self.pid: int | None = None           # no local process to kill: see kill_now
        self._threads = threads
        self._host_cpu = host_cpu
        self._warn = warn
        self._actor: ActorRef | None = None
        #: what the actor said when it started: its node, pid, its benchmark worker's pid, CPU, GPUs
        self.actor_info: ActorInfo = {}
        self._lock = threading.Lock()
        self._sent: dict[str, str] = {}       # our vmfb path -> the actor's copy
        self._digests: dict[str, tuple[int, str]] = {}

    # ---- the actor ------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the actor now (its benchmark worker's torch import then overlaps the compiles)."""
        with self._lock:
            self._ensure_actor()

    def _ensure_actor(self) -> ActorRef:
        if self._actor is not None:
            return self._actor
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self.cluster.check()
        if not self.cluster.node_alive(self.slot.node.node_id):
            raise WorkerLost(f"node {self.node} left the Ray cluster", self.node, False)
        kind = self.slot.device.partition(":")[0]
        local = f"{kind}:0" if self.slot.gpu else "cpu"   # the one GPU Ray lets the actor see
        actor = actor_class().options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(self.slot.node.node_id, soft=False),
            num_cpus=0,                    # compiles may use the node's CPUs between batches
            num_gpus=1 if self.slot.gpu else 0,
            name=f"boo-measure-{os.getpid()}-{id(self):x}",
        ).remote(local, self._threads)
        try:
            info: ActorInfo = ray.get(actor.info.remote(), timeout=START_TIMEOUT_S)
        except Exception as e:  # noqa: BLE001 - it never came up
            with contextlib.suppress(Exception):
                ray.kill(actor)
            self._raise_lost(e, "while starting")
        if self.slot.gpu and info.get("gpus"):
            self.device = f"{kind}:{info['gpus'][0]}"
        if self._host_cpu and info.get("cpu") and info["cpu"] != self._host_cpu and not self.slot.gpu \
                and self._warn is not None:
            self._warn(f"node {self.node} has CPU {info['cpu']}, the kernels are compiled for this host's "
                       f"{self._host_cpu}: its times are of kernels tuned for another CPU")
        if info.get("nice") and self._warn is not None:
            self._warn(f"the measuring actor on node {self.node} runs at nice {info['nice']} (Ray's worker "
                       f"niceness; it may not be lowered there): start that node with RAY_worker_niceness=0, or "
                       f"its measurements lose the CPU to anything else running there")
        self.actor_info = info.copy()
        self._actor = actor
        return actor

    def close(self) -> None:
        with self._lock:
            actor, self._actor = self._actor, None
        self._stop_actor(actor)

    def kill_now(self) -> None:
        """Last resort (a second Ctrl-C): the actor is Ray's process; tell Ray to kill it, without waiting."""
        actor = self._actor
        if actor is not None and self.cluster.alive():
            with contextlib.suppress(Exception):
                import ray

                ray.kill(actor)

    def _stop_actor(self, actor: ActorRef | None) -> None:
        if actor is None or not self.cluster.alive():
            return
        import ray

        with contextlib.suppress(Exception):
            ray.get(actor.close.remote(), timeout=10)
        with contextlib.suppress(Exception):
            ray.kill(actor)

    # ---- one measurement --------------------------------------------------------------------------------------
    def run(self, spec: BenchSpec, on_samples: Callable[[list[float]], None] | None = None,
            cancel: threading.Event | None = None) -> BenchOutcome:
        import ray

        with self._lock:
            actor = self._ensure_actor()
            rid = None
            try:
                spec = self._with_kernel(actor, spec)
                rid = ray.get(actor.start.remote(spec), timeout=CALL_TIMEOUT_S)
                cancel_sent = False
                while True:
                    if cancel is not None and cancel.is_set() and not cancel_sent:
                        actor.cancel.remote(rid)
                        cancel_sent = True
                    batch, end = ray.get(actor.poll.remote(rid, POLL_WAIT_S), timeout=POLL_WAIT_S + CALL_TIMEOUT_S)
                    if batch and on_samples is not None:
                        on_samples(list(batch))
                    if end is None:
                        continue
                    if end[0] == "done":
                        return end[1]
                    if end[0] == "cancelled":
                        raise BenchCancelled("cancelled")
                    raise BenchFailed(f"{end[1]} (on node {self.node})")
            except (BenchFailed, BenchCancelled):
                raise
            except BaseException as e:
                if not isinstance(e, (ray.exceptions.RayError, ConnectionError)):
                    # ours (the caller's sample sink raised, an interrupt): the actor stops this measurement
                    if rid is not None:
                        with contextlib.suppress(Exception):
                            actor.cancel.remote(rid)
                    raise
                # the actor died, a call timed out, or the head is gone
                self._actor = None
                self._sent.clear()
                with contextlib.suppress(Exception):
                    ray.kill(actor)
                self._raise_lost(e, "mid-measurement")

    def _raise_lost(self, e: BaseException, when: str) -> NoReturn:
        if not self.cluster.alive():
            raise ClusterLost(f"the Ray cluster at {self.cluster.address} went away") from None
        try:
            up = self.cluster.node_alive(self.slot.node.node_id)
        except Exception:  # noqa: BLE001 - cannot tell: say the node may be gone
            up = False
        what = type(e).__name__
        where = f"node {self.node}" if up else f"node {self.node} (which left the cluster)"
        raise WorkerLost(f"the Ray actor measuring on {where} died {when} ({what})", self.node, up) from None

    def _with_kernel(self, actor: ActorRef, spec: BenchSpec) -> BenchSpec:
        """`spec` with its kernel where the actor's node has it: sent once per actor unless the node sees it."""
        import ray

        path = spec.vmfb_path
        if not path:
            return spec
        if path not in self._sent:
            try:
                if path not in self._digests:
                    self._digests[path] = (os.path.getsize(path), file_sha256(Path(path)))
                size, digest = self._digests[path]
                there = ray.get(actor.local_copy.remote(path, size, digest), timeout=CALL_TIMEOUT_S)
                blob = Path(path).read_bytes() if there is None else b""
            except OSError as e:
                raise BenchFailed(f"cannot read the artifact {path}: {e.strerror or e}") from None
            if there is None:
                there = ray.get(actor.receive.remote(digest, blob), timeout=CALL_TIMEOUT_S)
            self._sent[path] = there
        return dataclasses.replace(spec, vmfb_path=self._sent[path])
