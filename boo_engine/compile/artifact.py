"""The record of a compiled kernel in the cache (`Artifact`), rebuilt from the entry's meta.json."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..fsutil import read_regular_text
from ..results import CompileInfo
from ..targets import Target
from ..variants import Variant
from .cache import KernelCache, mlir_file_name
from .entry import CONFIGS, META, VMFB


@dataclass
class Artifact:
    """A compiled kernel in the cache and how it came to be."""

    func_name: str
    target: Target
    variant: Variant
    vmfb_path: str
    dir: str
    key: str
    command: list[str]              # exact iree-compile command line (as in compile_command.sh)
    compile_seconds: float          # export + compile wall time of THIS call; 0.0 on a cache hit
    cache_hit: bool
    compiler_version: str
    num_dispatches: int
    configs_dir: str                # dumped executable configurations (one .mlir per dispatch)
    mlir_path: str
    flags: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)  # the entry's meta.json
    scratch_dir: str = ""           # a writable folder for this kernel's extras (reproducer inputs): `dir`
                                    # itself, or the overlay's when the entry is in a read-only cache
    untrusted: str = ""             # the entry this compile replaced because it was not trusted (where and why,
                                    # one line: compile/trust.py), for the front end's once-per-run notice

    def to_compile_info(self) -> CompileInfo:
        return CompileInfo(seconds=self.compile_seconds, cache_hit=self.cache_hit, command=list(self.command),
                           artifact=self.vmfb_path, key=self.key, compiler_version=self.compiler_version,
                           num_dispatches=self.num_dispatches,
                           decompositions=[str(d) for d in self.meta.get("decompositions", [])],
                           build=self.build)

    @property
    def build(self) -> str | None:
        """How the kernel was built, in one line ("ours", "boo: iree-turbine 3.9.0", "boo: our export (why)");
        None for an entry from before builds were recorded."""
        b = self.meta.get("build")
        return b if isinstance(b, str) else None


def artifact_from_meta(cache: KernelCache, meta: dict[str, Any], target: Target, variant: Variant, *,
                       cache_hit: bool, seconds: float, untrusted: str = "") -> Artifact:
    """The Artifact of the cache entry whose validated meta.json is `meta` (where `cache.load` found it: a hit
    may live in a read-only cache)."""
    func, key = meta["func_name"], meta["key"]
    d = cache.found_dir(func, key)
    return Artifact(func_name=func, target=target, variant=variant, vmfb_path=str(d / VMFB), dir=str(d), key=key,
                    command=list(meta["command"]), compile_seconds=seconds, cache_hit=cache_hit,
                    compiler_version=meta["compiler_version"], num_dispatches=int(meta["num_dispatches"]),
                    configs_dir=str(d / CONFIGS),
                    mlir_path=str(d.parent / _mlir_name(meta, func, variant)),
                    flags=list(meta["flags"]), meta=meta, scratch_dir=str(cache.entry_dir(func, key)),
                    untrusted=untrusted)


def _mlir_name(meta: dict[str, Any], func: str, variant: Variant) -> str:
    """The entry's source file beside it: as meta.json names it, else (an older entry) its formulation's."""
    name = meta.get("mlir_name")
    if isinstance(name, str) and name and "/" not in name and name not in (".", ".."):
        return name
    return mlir_file_name(func, variant.export_formulation(func))


def entry_binary_digest(vmfb_path: str) -> str | None:
    """The first 16 hex digits of the sha256 of the kernel whose cache entry holds `vmfb_path` (its meta.json's,
    read as a regular file only), or None when that cannot be read: two configurations that build the same binary
    are one kernel."""
    try:
        meta = json.loads(read_regular_text(Path(vmfb_path).parent / META))
    except (OSError, ValueError):
        return None
    sha = meta.get("vmfb_sha256") if isinstance(meta, dict) else None
    return str(sha)[:16] if sha else None


def entry_configs_dir(vmfb_path: str) -> str:
    """The folder of the dumped dispatch configurations beside a cached kernel."""
    return str(Path(vmfb_path).parent / CONFIGS)
