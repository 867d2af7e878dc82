"""What the pool and its worker processes say to each other over their pipe: one request per job, one reply per
request (and `None` to ask a worker to exit). Small frozen dataclasses, pickled by multiprocessing."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from ..errors import BooError, CompileError, VariantError
from ..ops.base import OpSignature
from ..targets import Target
from ..variants import Variant
from .artifact import Artifact
from .storage import CacheStoreError


@dataclass(frozen=True)
class CompileRequest:
    """Compile a kernel into the cache."""

    sig: OpSignature
    target: Target
    variant: Variant
    extra_flags: tuple[str, ...] = ()

    what: ClassVar[str] = "compile"


@dataclass(frozen=True)
class DumpRequest:
    """Compile a kernel and dump its dispatches into `out_dir/<func_name>/` (compile.dump)."""

    sig: OpSignature
    target: Target
    variant: Variant
    out_dir: str

    what: ClassVar[str] = "dispatch dump"


Request = CompileRequest | DumpRequest


@dataclass(frozen=True)
class Compiled:
    artifact: Artifact


@dataclass(frozen=True)
class Dumped:
    files: tuple[str, ...]

    def paths(self) -> list[Path]:
        return [Path(f) for f in self.files]


@dataclass(frozen=True)
class Failed:
    """The job failed: a CompileError (or, for a bad dump folder, a VariantError; for a cache that takes no
    more writes, a CacheStoreError: `cache_root` and `cache_reason` set) to raise in the caller."""

    message: str
    stderr: str = ""
    command: tuple[str, ...] = ()
    variant_error: bool = False
    cache_root: str = ""
    cache_reason: str = ""

    def error(self) -> BooError:
        if self.variant_error:
            return VariantError(self.message)
        if self.cache_reason:
            return CacheStoreError(self.cache_root, self.cache_reason, stderr=self.stderr, command=list(self.command))
        return CompileError(self.message, stderr=self.stderr, command=list(self.command))


Reply = Compiled | Dumped | Failed
