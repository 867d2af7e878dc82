"""Errors the engine raises on purpose. Each carries a one-line, user-facing message."""
from __future__ import annotations


class BooError(Exception):
    """Base of every deliberate boo_engine error: the message is fit to show a user as-is."""


class CommandError(BooError, ValueError):
    """A malformed MIOpenDriver command (or commands-file line). The message names the offending token."""


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


class LaunchError(BooError, ValueError):
    """A launchable was called with arguments of the wrong number, shape or dtype, or failed to load."""
