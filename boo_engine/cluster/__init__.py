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
"""
from __future__ import annotations

import os

from ..errors import BooError

#: the environment variable naming the cluster when --ray is not given
RAY_ENV = "BOO_RAY_ADDRESS"
INSTALL_HINT = 'pip install "ray>=2.9" (or, in a boo-tui checkout, pip install -e ".[ray]")'


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


def require_ray() -> None:
    """Raise ClusterError with the one line that says how to install ray, when it is missing."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ClusterError(f"--ray needs the optional ray extra, which is not installed: {INSTALL_HINT}") from None
