"""Writing files so that a reader never sees half of one: the one helper every writer of the engine uses."""
from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike[str], data: str | bytes | Callable[[IO[bytes]], object], *,
                 fsync: bool = False, private: bool = False, make_parents: bool = False) -> Path:
    """Write `data` (text as UTF-8, bytes, or a callable that writes into the open binary file) to a temporary
    file beside `path`, then rename it over `path`: readers see the old file or the new one, never a part, and a
    failure (full disk, Ctrl-C) leaves the old file and no temporary behind. `fsync` also survives a power cut.
    The file gets ordinary permissions (0666 less the umask) unless `private` (0600, mkstemp's). Raises OSError."""
    p = Path(path)
    if make_parents:
        p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data.encode("utf-8") if isinstance(data, str) else data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        if not private:
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return p
