"""What every part of the variants package shares: its constants, reading a variant's file, naming."""
from __future__ import annotations

import re
from pathlib import Path

from .. import locations
from ..errors import VariantError

BASELINE_NAME = "baseline"
#: the best known configuration of every kernel for this machine (a run's `best` column: variants.variant BEST)
BEST_NAME = "best"
#: the attribute our specs put on every op they configure, so "did it apply?" needs no guesswork
SPEC_MARKER = "__tuning_spec_applied__"
#: the env var iree-boo-driver reads a tuning spec from
TUNING_SPEC_ENV = locations.TUNING_SPEC_ENV
#: written by dump_dispatches next to the dumped files: which kernel, and the digest of every original file
DUMP_MANIFEST = "boo-dump.json"
SPEC_SUFFIXES = (".mlir", ".mlirbc")
#: what a dispatch substitution replaces: the executable's source, or only its chosen configuration
KINDS = ("source", "configuration")

NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:+@%-]{0,63}$")


def file_bytes(path: str) -> bytes:
    """The content of a file a variant names (a spec, a substituted dispatch), or VariantError naming it."""
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise VariantError(f"variant file {path}: {e.strerror or e}") from None


def safe_name(text: str) -> str:
    """`text` made into a valid variant name (invalid characters become '_')."""
    name = re.sub(r"[^A-Za-z0-9_.:+@%-]", "_", text)[:64].lstrip("-.") or "variant"
    return name


def one_line(text: str) -> str:
    return " ".join(text.split())
