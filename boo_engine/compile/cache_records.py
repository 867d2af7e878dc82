"""The kernel cache's two shortcut indexes: signed records mapping what selects a kernel to the entry that holds it.

- `.index/<xx>/<digest>`: everything that determines the MLIR and the flags (the signature's repr, the source
  of its class's package, the torch version) with the key's other parts (flags, target identity, variant,
  compiler) -> (func_name, key): a hit skips the export, so a warm `get_launchable` costs a few file reads;
- `.prebuilt/<xx>/<digest>`: the same without the torch and compiler versions, what a machine with no compiler
  can compute: a GPU box lent a cache filled elsewhere (`boo-driver --preload --target cuda:sm_80 --cache-dir
  DIR`), whose torch may not be the exporting one, misses in the index; `compile.build` then resolves kernels
  through this one alone, and says which compiler and torch built what it runs.

Each record is sealed with the cache's key (trust.py) under its kind and digest: a record that does not open is
not followed (the cache's `untrusted` names it).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Protocol

from ..fsutil import atomic_write, read_regular_text
from . import trust
from .entry import SCHEMA
from .sources import (
    class_source_digest,
    torch_version,  # tests replace it here (another machine's torch)
)


class RecordsHost(Protocol):
    """What the records need of their cache (cache.KernelCache)."""

    root: Path
    key: trust.CacheKey
    untrusted: dict[tuple[str, str], str]

    def roots(self) -> list[Path]: ...


def index_key(sig: object, flags: list[str], target_identity: str, variant_key: str, compiler_version: str) -> str:
    material = [f"schema{SCHEMA}", type(sig).__module__, type(sig).__qualname__, repr(sig),
                class_source_digest(type(sig)), torch_version(), list(flags), target_identity,
                variant_key, compiler_version]
    return hashlib.sha256(json.dumps(material).encode()).hexdigest()


def prebuilt_key(sig: object, flags: list[str], target_identity: str, variant_key: str) -> str:
    """The index key without the torch and compiler versions: what a machine with no compiler can compute."""
    material = [f"prebuilt{SCHEMA}", type(sig).__module__, type(sig).__qualname__, repr(sig),
                class_source_digest(type(sig)), list(flags), target_identity, variant_key]
    return hashlib.sha256(json.dumps(material).encode()).hexdigest()


class SignedRecords:
    """One index of the cache (`kind` "index" or "prebuilt", kept under `<root>/<folder>`): lookups over the cache's
    roots (first readable record signed with its key wins), writes into its writable root."""

    def __init__(self, cache: RecordsHost, kind: str, folder: str) -> None:
        self._cache, self.kind, self._folder = cache, kind, folder

    def path(self, k: str, root: Path | None = None) -> Path:
        return (root or self._cache.root) / self._folder / k[:2] / k

    def lookup(self, k: str) -> tuple[str, str] | None:
        """(func_name, key) recorded for `k`, or None."""
        cache = self._cache
        for root in cache.roots():
            try:
                rec = json.loads(read_regular_text(self.path(k, root)))
                if cache.key.opens(f"{self.kind}:{k}", rec):
                    return str(rec["func_name"]), str(rec["key"])
                cache.untrusted[(self.kind, k)] = f"{self.path(k, root)}: {trust.UNSIGNED}"
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return None

    def record(self, k: str, func_name: str, key: str) -> None:
        """Remember which entry `k` resolves to (the latest build wins); skipped when it already does."""
        if self.lookup(k) == (func_name, key):
            return
        sealed = self._cache.key.seal(f"{self.kind}:{k}", {"func_name": func_name, "key": key})
        atomic_write(self.path(k), json.dumps(sealed), make_parents=True, private=True)
