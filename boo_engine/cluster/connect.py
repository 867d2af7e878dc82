"""The connection to a Ray cluster: joining it, its nodes, where measurements go, and whether it is still there.

Two traps of a Ray driver shape this module (both seen with ray 2.60 on a loopback cluster):
- `ray.init` at an address where no cluster answers retries for minutes: the head's port is tried first, with a
  short TCP connect, so a wrong address is one line at once;
- once the head is gone, a driver exits by itself 60 s later (`gcs_rpc_server_reconnect_timeout_s`), and a new
  `.remote()` of a function not sent yet blocks forever. A run must end cleanly as interrupted instead, with
  the dashboard still up: the driver is started with a long reconnect timeout, every function and actor class
  is sent when we connect, and `alive()` asks the head's port (never Ray) before anything is blamed on a node.
"""
from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypedDict

from ..errors import ClusterLost, one_line
from . import AUTH_MODE_ENV, LOCAL, ClusterError, is_client, loopback_host, node_label, require_ray

#: the namespace our actors live in (named per session, so a second session never takes the first one's)
NAMESPACE = "boo-tui"
#: how long the head's port may take to accept a connection
PROBE_TIMEOUT_S = 3.0
#: where a ray:// address without a port finds the cluster's client server (Ray's default)
CLIENT_PORT = 10001
#: what Ray's driver waits for a lost head before it exits the process by itself: long, so the run ends
#: cleanly (interrupted, results kept) and a dashboard stays up
RECONNECT_ENV = "RAY_gcs_rpc_server_reconnect_timeout_s"
RECONNECT_S = "86400"
#: how long joining through Ray's client (ray://) may take. Ray's client waits for its server's answer without a
#: limit, and when joining fails it can hang for good closing its log stream (a client server that took the
#: connection and never answered: seen once in ~25 ray:// runs beside 4 busy processes). A join takes 2-15 s.
CLIENT_JOIN_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class Node:
    node_id: str
    host: str                 # the node's hostname
    ip: str
    cpus: float
    gpus: float

    @property
    def label(self) -> str:
        return node_label(self.host, self.node_id)


class NodeRecord(TypedDict):
    node: str                 # Node.label
    ip: str
    cpus: float
    gpus: float


class ClusterRecord(TypedDict):
    """What a run records about the cluster it ran on (`Cluster.describe`: the run's environment, "ray")."""

    address: str
    nodes: list[NodeRecord]


class _LocalInit(TypedDict, total=False):
    """What `ray.init` is told beside the address for a cluster of our own (--ray local)."""

    include_dashboard: bool


@dataclass(frozen=True)
class Slot:
    """One measuring place: a node's CPU (cpu target) or one of its GPUs (GPU targets)."""

    node: Node
    device: str               # what results record: "cpu", or "cuda:N" / "hip:N" (N counts that node's GPUs)
    gpu: bool


class Cluster:
    """A joined Ray cluster. One per process: joining again (a tune's next session) reuses the connection."""

    _lock = threading.Lock()
    _joined: str | None = None

    def __init__(self, address: str) -> None:
        require_ray(address)
        self.address = address
        self._head = _head_endpoint(address)
        if self._head is not None and not _port_open(*self._head):
            raise ClusterError(f"no Ray cluster answers at {address} (start one with `ray start --head`, or give "
                               f"the address `ray start` printed)")
        self._join()
        import ray

        if self._head is None:   # "auto" or "local": ask Ray where its head is
            with contextlib.suppress(Exception):
                self._head = _split_host_port(ray.get_runtime_context().gcs_address)
        self._lost = False

    def _join(self) -> None:
        import ray

        with Cluster._lock:
            if ray.is_initialized():
                if Cluster._joined not in (None, self.address):
                    raise ClusterError(f"this process is already joined to the Ray cluster at {Cluster._joined}")
                return
            os.environ.setdefault(RECONNECT_ENV, RECONNECT_S)
            # --ray local: no dashboard (a web server that runs jobs), and every process on loopback (require_ray)
            local: _LocalInit = {"include_dashboard": False} if self.address == LOCAL else {}
            try:
                _bounded(is_client(self.address), lambda: ray.init(
                    address=self.address, namespace=NAMESPACE, log_to_driver=False, logging_level=logging.ERROR,
                    configure_logging=False, **local))
            except Exception as e:  # noqa: BLE001 - ConnectionError, ValueError for a bad address...: one line
                hint = "" if type(e) is not ConnectionError or AUTH_MODE_ENV in os.environ else (
                    f" (a cluster with Ray's token authentication needs {AUTH_MODE_ENV}=token here too)")
                raise ClusterError(f"cannot join the Ray cluster at {self.address}: {_why(e)}{hint}") from None
            if local:
                _check_on_loopback()
            Cluster._joined = self.address
        from . import remote

        remote.export_all()   # send every function and actor class now, while the head surely answers

    # ---- the cluster's state ---------------------------------------------------------------------------
    def alive(self) -> bool:
        """Does the cluster's head still answer? A TCP connect to its port: never blocks on Ray."""
        if self._lost:
            return False
        if self._head is None:
            return True
        if not _port_open(*self._head):
            self._lost = True
        return not self._lost

    def check(self) -> None:
        """Raise ClusterLost when the head no longer answers."""
        if not self.alive():
            raise ClusterLost(f"the Ray cluster at {self.address} went away")

    def nodes(self) -> list[Node]:
        """The cluster's live nodes, in a stable order (the head's first, then by host and id)."""
        self.check()
        import ray

        found = []
        for n in ray.nodes():
            if not n.get("Alive"):
                continue
            res = n.get("Resources") or {}
            found.append(Node(node_id=str(n["NodeID"]), host=str(n.get("NodeManagerHostname") or "?"),
                              ip=str(n.get("NodeManagerAddress") or "?"), cpus=float(res.get("CPU", 0)),
                              gpus=float(res.get("GPU", 0))))
        head_ip = self._head[0] if self._head else None
        return sorted(found, key=lambda n: (n.ip != head_ip, n.host, n.node_id))

    def node_alive(self, node_id: str) -> bool:
        return any(n.node_id == node_id for n in self.nodes())

    def slots(self, kind: str) -> list[Slot]:
        """Where to measure for a target of `kind`: every live node with a CPU for the cpu target (one each:
        a node's CPU is one device), every GPU of every node for GPU targets."""
        nodes = self.nodes()
        if kind == "cpu":
            return [Slot(n, "cpu", False) for n in nodes if n.cpus >= 1]
        return [Slot(n, f"{kind}:{i}", True) for n in nodes for i in range(int(n.gpus))]

    def describe(self) -> ClusterRecord:
        """What a run records about the cluster it ran on."""
        nodes = self.nodes()
        return {"address": self.address, "nodes": [
            {"node": n.label, "ip": n.ip, "cpus": n.cpus, "gpus": n.gpus} for n in nodes]}


def _bounded(bounded: bool, join: Callable[[], object]) -> None:
    """`join()`, on a thread of its own given CLIENT_JOIN_TIMEOUT_S when `bounded` (a thread left hanging inside
    Ray is a daemon: it does not keep the process from exiting)."""
    if not bounded:
        join()
        return
    failed: list[BaseException] = []

    def run() -> None:
        try:
            join()
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            failed.append(e)

    logging.getLogger("ray._private.worker").addFilter(_not_main_thread_note)
    thread = threading.Thread(target=run, name="boo-ray-join", daemon=True)
    thread.start()
    thread.join(CLIENT_JOIN_TIMEOUT_S)
    if thread.is_alive():
        raise TimeoutError(f"its client server took the connection but did not finish joining in "
                           f"{CLIENT_JOIN_TIMEOUT_S:.0f} s")
    if failed:
        raise failed[0]


def _not_main_thread_note(record: logging.LogRecord) -> bool:
    """Ray's note that a join off the main thread leaves SIGTERM alone: what we want (the front end's own stop
    handler stays), not a line for the user."""
    return not str(record.msg).startswith("SIGTERM handler is not set")


def _split_host_port(text: str) -> tuple[str, int] | None:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]") or "127.0.0.1", int(port)


def _head_endpoint(address: str) -> tuple[str, int] | None:
    """What answers for the cluster: the head's host and GCS port for a plain HOST:PORT address, its client
    server's for ray://HOST[:PORT]; None for "auto" and "local" (Ray finds those)."""
    if is_client(address):
        rest = address[len("ray://"):].split("/", 1)[0]
        return _split_host_port(rest) or (rest.strip("[]") or "127.0.0.1", CLIENT_PORT)
    if "://" in address:
        return None
    return _split_host_port(address)


def _check_on_loopback() -> None:
    """--ray local: refuse a cluster that Ray put on a network address after all (a Ray without the switch)."""
    import ray

    gcs = _split_host_port(ray.get_runtime_context().gcs_address or "")
    hosts = {str(n.get("NodeManagerAddress")) for n in ray.nodes()} | {gcs[0] if gcs else "?"}
    exposed = sorted(h for h in hosts if not loopback_host(h))
    if exposed:
        ray.shutdown()
        raise ClusterError(f"Ray started the local cluster on {', '.join(exposed)}, not on loopback, where anyone "
                           f"who reaches this machine could run code on it: not using it")


def _why(e: BaseException) -> str:
    """One line for a failed join. Ray's client says "Initialization failure from server:" and then the server's
    traceback, whose last line is the reason."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):
        return f"{type(e).__name__}: {lines[0]} {lines[-1]}"
    return one_line(e)


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S):
            return True
    except OSError:
        return False
