"""Standard output that cannot be written (`> /dev/full`, a pipe whose reader left) is the user's situation, not a
bug of ours: one line on stderr, exit 1, and what was measured is already in the database. Without this a full
disk ended a finished run in `internal error: OSError: [Errno 28]`, and the interpreter's own flush at exit printed
a second traceback."""
from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from ..errors import BooError


class OutputError(BooError):
    """Standard output refused a write; the message says why."""


class _CheckedStdout:
    """`sys.stdout` whose failed writes are an OutputError (everything else is the stream's own)."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        try:
            return self._inner.write(text)
        except OSError as e:
            raise _gone(e) from None

    def flush(self) -> None:
        try:
            self._inner.flush()
        except OSError as e:
            raise _gone(e) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _gone(e: OSError) -> OutputError:
    """The error, after pointing file descriptor 1 at the null device: what is still buffered then goes nowhere
    instead of failing again at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.__stdout__.fileno() if sys.__stdout__ is not None else 1)
        finally:
            os.close(devnull)
    except (OSError, ValueError):
        pass
    return OutputError(f"cannot write to standard output ({e.strerror or type(e).__name__}); anything measured "
                       "is in the database")


@contextlib.contextmanager
def checked_stdout() -> Iterator[None]:
    """For a front end's run: writes to stdout that fail raise OutputError, the last flush included."""
    inner = sys.stdout
    if inner is None or isinstance(inner, _CheckedStdout):
        yield
        return
    sys.stdout = _CheckedStdout(inner)
    try:
        yield
        sys.stdout.flush()   # here, where an error is still one line
    finally:
        sys.stdout = inner
