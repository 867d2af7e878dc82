"""How a front end ends: its exit code, a usage error's one line (`fail`), a bug of ours as one line
(`internal_error`), and `guarded` / `run_subcommand`, which run a front end's work and turn whatever it raises
into one of those."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from .. import locations
from ..errors import BooError
from .output import OutputError, checked_stdout

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_REGRESSION = 0, 1, 2, 3


def internal_error(prog: str, e: BaseException) -> int:
    """An error that is a bug of ours, not the user's: one line, and the traceback with BOO_DEBUG=1. (Standard
    output that cannot be written is not one: its one line, exit 1.)"""
    if isinstance(e, OutputError):
        return fail(prog, str(e), EXIT_FAILED)
    if locations.debug():
        import traceback

        traceback.print_exception(e)
    else:
        print(f"{prog}: internal error: {type(e).__name__}: {e} (set BOO_DEBUG=1 for the traceback)",
              file=sys.stderr)
    return EXIT_FAILED


def fail(prog: str, message: str, code: int = EXIT_USAGE) -> int:
    print(f"{prog}: error: {message}", file=sys.stderr)
    return code


def run_subcommand(prog: str, parser: argparse.ArgumentParser, run: Callable[[argparse.Namespace], int],
                   argv: Sequence[str] | None) -> int:
    """A subcommand's main (capture, peak): parse `argv` with its RaisingParser (a bad argument is a UsageError,
    `--help` its exit code), then `run(args)`, both `guarded`."""
    def body() -> int:
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:  # --help
            return int(e.code or 0)
        return run(args)

    return guarded(prog, body)


def guarded(prog: str, body: Callable[[], int]) -> int:
    """Run a front end's work: its exit code; Ctrl-C 130; a BooError one line and exit 2; anything else a bug of
    ours, one line (internal_error)."""
    try:
        with checked_stdout():
            return body()
    except KeyboardInterrupt:
        return 130
    except OutputError as e:
        return fail(prog, str(e), EXIT_FAILED)
    except BooError as e:
        return fail(prog, str(e))
    except Exception as e:  # noqa: BLE001 - a bug of ours: one line, the traceback on request
        return internal_error(prog, e)
