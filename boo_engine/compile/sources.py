"""What the cache's index keys hash besides a signature's repr: the torch that exports the MLIR and the source of
the signature's op package (compile/cache.py)."""
from __future__ import annotations

import functools
import hashlib
import sys
from pathlib import Path


@functools.cache
def torch_version() -> str:
    """The installed torch's version (the exported MLIR depends on it), read from its package metadata: a
    cache lookup must not import torch (~1 s)."""
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:  # a source checkout on sys.path
        import torch

        return str(torch.__version__)


#: the code that turns any signature into MLIR (export, the lowering rule): a change there changes MLIR too
EXPORT_CODE = (Path(__file__).with_name("export.py"), Path(__file__).with_name("lowering.py"))


def class_source_digest(cls: type) -> str:
    """Digest of every Python file in the package folder defining a signature class (e.g. boo_engine/ops/) and
    of the export code (EXPORT_CODE): a change to how an op is expressed must miss the index, since the MLIR may
    change while the signature's repr does not (a kernel exported before a fix to export.py was handed out by the
    index after it). Computed once per class per process."""
    return _source_digest(cls.__module__, cls.__qualname__)


@functools.cache
def _source_digest(module: str, qualname: str) -> str:
    h = hashlib.sha256(qualname.encode())
    try:
        folder = Path(getattr(sys.modules.get(module), "__file__", None) or "").parent
        for f in [*sorted(folder.glob("*.py")), *EXPORT_CODE]:
            h.update(f.name.encode() + b"\0" + f.read_bytes())
    except (OSError, TypeError):
        pass
    return h.hexdigest()
