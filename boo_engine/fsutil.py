"""Writing files so that a reader never sees half of one: the one helper every writer of the engine uses; and
reading a file that someone else may have put there (a kernel cache): a regular file or nothing."""
from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
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


@contextlib.contextmanager
def open_regular(path: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """Open `path` for reading only if it is a regular file, not through a symlink at its last component: a FIFO
    put where a file should be would block the open (and the run) forever, a device or a folder reads nonsense,
    a link may point anywhere. Opened non-blocking, checked with fstat on what was opened, then read normally.
    Raises OSError (ELOOP for a link, EINVAL for anything not a regular file)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(22, "not a regular file", str(path))
        os.set_blocking(fd, True)
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with f:
        yield f


def read_regular(path: str | os.PathLike[str]) -> bytes:
    """The bytes of `path` when it is a regular file (open_regular); OSError otherwise."""
    with open_regular(path) as f:
        return f.read()


def read_regular_text(path: str | os.PathLike[str]) -> str:
    """read_regular, decoded as UTF-8 (UnicodeDecodeError is a ValueError, as json's errors are)."""
    return read_regular(path).decode("utf-8")


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The file's sha256; OSError when it is not a regular file (a FIFO would block the read forever)."""
    h = hashlib.sha256()
    with open_regular(path) as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def open_lock_file(path: str | os.PathLike[str]) -> int:
    """A descriptor of the lock file at `path` for flock: a regular file, opened never through a link and never
    blocking. A planted symlink in its place made a run create the link's target; a FIFO would block the open.
    We only ever make regular lock files, so anything else there is removed (once) and made anew. OSError when
    that fails."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    for attempt in (0, 1):
        try:
            fd = os.open(path, flags, 0o600)
        except OSError:
            if attempt == 0 and os.path.islink(path):
                with contextlib.suppress(OSError):
                    os.unlink(path)
                continue
            raise
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
        os.close(fd)
        if attempt == 0:
            with contextlib.suppress(OSError):
                os.unlink(path)
    raise OSError(22, "not a regular file and cannot be replaced", str(path))
