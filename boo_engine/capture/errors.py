"""The capture's one-line errors."""
from __future__ import annotations

from ..errors import BooError


class CaptureError(BooError, ValueError):
    """Bad capture input (a model that does not import or run, a trace that is not one, a bad --input): one line,
    exit code 2. `first_line` keeps messages of foreign exceptions to one line."""


def first_line(e: BaseException) -> str:
    """`TypeError: boom` from an exception whose message may span lines (the first non-empty one is kept)."""
    text = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), "")
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
