"""Errors the engine raises on purpose. Each carries a one-line, user-facing message."""
from __future__ import annotations


class BooError(Exception):
    """Base of every deliberate boo_engine error: the message is fit to show a user as-is."""


#: the most characters of user input (a command line, a token) a one-line message quotes
QUOTE_LIMIT = 200


def elide(text: str, limit: int = QUOTE_LIMIT) -> str:
    """`text` when it has at most `limit` characters, else its start and end around ` ... `, `limit` long in all:
    what a one-line message quotes of a line the user may have made a megabyte long."""
    if len(text) <= limit:
        return text
    tail = max(limit // 4, 1)
    head = max(limit - tail - 5, 1)
    return f"{text[:head]} ... {text[-tail:]}"


class CommandError(BooError, ValueError):
    """A malformed MIOpenDriver command (or commands-file line). The message names the offending token, and is
    kept to one readable line: past QUOTE_LIMIT + 50 characters it is elided in the middle."""

    def __init__(self, message: str = "") -> None:
        super().__init__(elide(str(message), QUOTE_LIMIT + 50))


class TargetError(BooError, ValueError):
    """An unknown or unusable target such as `hip:gfx9999` or `cuda` without an arch."""


class VariantError(BooError, ValueError):
    """A bad variant definition: missing spec file, malformed spec, bad flags or variants file."""


class CompileError(BooError):
    """export or iree-compile failed, crashed or timed out.

    `stderr` keeps the compiler's own output and `command` the exact command line, so the failure can be
    reproduced outside the tool.
    """

    def __init__(self, message: str, *, stderr: str = "", command: list[str] | None = None):
        super().__init__(message)
        self.stderr = stderr
        self.command = list(command or [])


class ClusterLost(BooError):
    """The Ray cluster a run measures or compiles on went away (its head unreachable): the run stops as
    interrupted, and `--resume` continues it (locally or on a cluster)."""


class LaunchError(BooError, ValueError):
    """A launchable was called with arguments of the wrong number, shape or dtype, or failed to load."""


def first_line(text: str, limit: int | None = None) -> str:
    """The first non-blank line of a (compiler's, tool's) message, stripped and at most `limit` characters."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if limit is None else line[:limit]


def one_line(e: BaseException) -> str:
    """An exception as one line for a user: our own errors speak for themselves, anything else is named."""
    first = first_line(str(e))
    if isinstance(e, BooError):
        return first or type(e).__name__
    return f"{type(e).__name__}: {first}" if first else type(e).__name__
