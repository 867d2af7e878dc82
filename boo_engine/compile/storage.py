"""A kernel cache that takes no more writes: a full disk (ENOSPC), a quota (EDQUOT), a file size limit (EFBIG in
Python, SIGXFSZ for iree-compile, which dies of it) or a read-only file system (EROFS) under the cache root.

A compile whose entry cannot be stored fails with `CacheStoreError`: ONE line naming the cache root, the reason
and what to do, e.g. `cannot store the kernel in the cache at PATH: disk full (free space or use --cache-dir)`,
instead of whatever iree-compile or Python said ("iree-compile crashed (SIGXFSZ)", "[Errno 28] ..."). It is a
CompileError, so it fails that job only; the session decides whether the run can go on (compile.cache hits still
measure) or stops because nothing can be stored (session/compiling.py).
"""
from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator
from pathlib import Path

from ..errors import CompileError

DISK_FULL = "disk full"
QUOTA = "disk quota exceeded"
TOO_LARGE = "file too large"
READ_ONLY = "read-only file system"

_ERRNO_REASONS = {errno.ENOSPC: DISK_FULL, errno.EDQUOT: QUOTA, errno.EFBIG: TOO_LARGE, errno.EROFS: READ_ONLY}
#: what iree-compile (LLVM's strerror) prints when its output cannot be written
_STDERR_REASONS = {"No space left on device": DISK_FULL, "Disk quota exceeded": QUOTA, "File too large": TOO_LARGE,
                   "Read-only file system": READ_ONLY}
_HINTS = {DISK_FULL: "free space or use --cache-dir", QUOTA: "free space or use --cache-dir",
          TOO_LARGE: "raise the file size limit, ulimit -f, or use --cache-dir",
          READ_ONLY: "make it writable or use --cache-dir"}


class CacheStoreError(CompileError):
    """The compiled kernel cannot be written into the cache (`root`) for `reason` (disk full, quota, file size
    limit, read-only). The message is the one line to show."""

    def __init__(self, root: str | Path, reason: str, *, stderr: str = "", command: list[str] | None = None):
        hint = _HINTS.get(reason, "use --cache-dir")
        super().__init__(f"cannot store the kernel in the cache at {root}: {reason} ({hint})", stderr=stderr,
                         command=command)
        self.root = str(root)
        self.reason = reason


def os_reason(e: OSError) -> str | None:
    """Why an OSError means the cache takes no more writes, or None for any other error."""
    return _ERRNO_REASONS.get(e.errno or 0)


def compiler_reason(e: CompileError) -> str | None:
    """Why a failed iree-compile could not write its output (killed by SIGXFSZ, or a write error in its
    stderr), or None for a compiler failure of any other kind."""
    if str(e).endswith("crashed (SIGXFSZ)"):   # compile.compiler_run's line for a compiler killed by that signal
        return TOO_LARGE
    return next((reason for text, reason in _STDERR_REASONS.items() if text in e.stderr), None)


@contextlib.contextmanager
def storing(root: Path) -> Iterator[None]:
    """Turn a write failure of the cache under `root` (Python's or iree-compile's) into CacheStoreError."""
    try:
        yield
    except CacheStoreError:
        raise
    except OSError as e:
        reason = os_reason(e)
        if reason is None:
            raise
        raise CacheStoreError(root, reason) from None
    except CompileError as e:
        reason = compiler_reason(e)
        if reason is None:
            raise
        raise CacheStoreError(root, reason, stderr=e.stderr, command=e.command) from None
