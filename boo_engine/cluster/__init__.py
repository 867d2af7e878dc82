"""Compiling and measuring on a Ray cluster (`--ray ADDRESS` / `$BOO_RAY_ADDRESS`).

boo-tui does not distribute work itself: it hands it to Ray, an engine users already run. What goes where:
- compiles are Ray tasks (1 CPU each) on any node (`compiling.RayCompilePool`, the local pool's interface);
- measurements are Ray actors holding one device each (`measuring.RayBenchWorker`, the local benchmark worker's
  interface): one per node for the cpu target, one per GPU (a `GPU` resource) for GPU targets. Each actor runs
  the same crash-isolated benchmark worker process a local run uses, on its node;
- artifacts travel through Ray's object store: a compile task returns its cache entry's files, which land in
  THIS host's kernel cache under the unchanged key; a measuring actor gets a kernel's bytes once and keeps them
  on its node. Where the nodes share the cache folder (same host, a shared filesystem) nothing is copied: the
  entry a node built is the one every other node finds.

The session is the same: samples stream back in batches, results record the node that measured them
(`JobResult.node`), a dead actor is a failed result (retried once on another node that has the device), and a
cluster that goes away stops the run as interrupted (`--resume` continues it).

`ray` is an optional extra: nothing here imports it until a cluster is asked for.

Whoever reaches a Ray cluster's ports runs code on it (Ray had no authentication before 2.52, and its token
authentication is off by default for `ray start`). `--ray local` therefore keeps the cluster it starts on this
machine's loopback, and a head given at a loopback address is joined on loopback too (`keep_on_loopback`).
"""
from __future__ import annotations

import ipaddress
import os
import secrets
import sys

from .. import locations
from ..errors import BooError

#: the environment variable naming the cluster when --ray is not given
RAY_ENV = locations.RAY_ADDRESS_ENV
INSTALL_HINT = 'pip install "ray[client]>=2.9" (or, in a boo-tui checkout, pip install -e ".[ray]")'
#: --ray local: a cluster of this machine, started for the run and gone with it
LOCAL = "local"
#: Ray's switch for a cluster that stays on one machine (Ray turns it off on macOS and Windows). Left on, as on
#: Linux by default, Ray replaces a loopback node address (`ray start --node-ip-address=127.0.0.1`, the driver's
#: own) by the machine's network address, and its GCS, raylets, workers, agents and the driver's own server then
#: listen on every interface. Off, the node's address is 127.0.0.1 and they listen on loopback only.
LOOPBACK_SWITCH = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
#: Ray's token authentication (Ray >= 2.52; older Rays ignore these): its mode, and the token itself
AUTH_MODE_ENV, AUTH_TOKEN_ENV, AUTH_TOKEN_PATH_ENV = "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"


class ClusterError(BooError):
    """--ray cannot be used: ray is not installed, or no cluster answers at the address."""


def node_label(host: str, node_id: str) -> str:
    """How results name a node: its host and the start of its Ray id (two raylets may share a host)."""
    return f"{host}/{node_id[:8]}"


def ray_address(given: str | None) -> str | None:
    """The cluster to use: `given` (--ray), else $BOO_RAY_ADDRESS, else None (run locally). An empty value is
    no cluster."""
    address = given if given is not None else os.environ.get(RAY_ENV)
    return address.strip() or None if address is not None else None


def is_client(address: str) -> bool:
    """A Ray client address (ray://HOST:PORT): this process talks to the cluster's client server, and is no node."""
    return address.startswith("ray://")


def loopback_host(host: str) -> bool:
    """127.x, ::1 (or an IPv4-mapped 127.x) or localhost."""
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def on_loopback(address: str) -> bool:
    """Is the cluster at `address` on this machine's loopback: `local`, or a head at a loopback HOST:PORT (not a
    ray:// client address: a client is no node, and listens on nothing)?"""
    if address == LOCAL:
        return True
    return not is_client(address) and ":" in address and loopback_host(address.rpartition(":")[0])


def keep_on_loopback() -> None:
    """Make Ray take 127.0.0.1 as this node's address (see LOOPBACK_SWITCH), for this process and the cluster
    processes it starts. Ray reads the switch when it is imported: where it was imported already, its reading is
    set too."""
    os.environ[LOOPBACK_SWITCH] = "0"
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None and getattr(constants, "ENABLE_RAY_CLUSTER", False):
        setattr(constants, "ENABLE_RAY_CLUSTER", False)  # noqa: B010 - (mypy knows no such attribute)


def lock_local() -> None:
    """--ray local, before Ray is imported: loopback alone still lets every user of this machine in, so the
    cluster also asks for a token, a fresh one only this process and its children hold (in their environment),
    unless the user chose Ray's authentication settings. (Ray 2.60 would otherwise write a token to
    ~/.ray/auth_token, and every `ray start` of the user after that asks for it from drivers that do not send it.)"""
    if "ray" in sys.modules or any(k in os.environ for k in (AUTH_MODE_ENV, AUTH_TOKEN_ENV, AUTH_TOKEN_PATH_ENV)):
        return   # (an imported Ray read its mode already: a token now would lock this driver out)
    os.environ[AUTH_MODE_ENV] = "token"
    os.environ[AUTH_TOKEN_ENV] = secrets.token_hex(32)


def require_ray(address: str | None = None) -> None:
    """Raise ClusterError with the one line that says how to install what `--ray address` needs, when it is
    missing: ray, and for a ray:// address Ray's client (grpcio, the `ray[client]` extra). A loopback cluster
    is kept on loopback (`keep_on_loopback`), and a local one locked (`lock_local`), before ray is imported."""
    if address == LOCAL:
        lock_local()
    if address is not None and on_loopback(address):
        keep_on_loopback()
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ClusterError(f"--ray needs the optional ray extra, which is not installed: {INSTALL_HINT}") from None
    if address is not None and is_client(address):
        try:
            import grpc  # noqa: F401
        except ImportError:
            raise ClusterError(f"--ray {address} needs Ray's client (grpcio), which is not installed: "
                               f"{INSTALL_HINT}") from None
