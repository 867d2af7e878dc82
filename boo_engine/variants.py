"""Variants: named compile configurations of the same kernel (tuning specs, extra compiler flags, substituted
dispatch sources or configurations, a preprocessing step). The baseline is `Variant()`.

This module holds the data model the compiler relies on (`compile_flags`, `key_material`); parsing, spec
pre-flight and the "did the spec apply?" check build on it.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from .errors import VariantError

BASELINE_NAME = "baseline"


@dataclass(frozen=True)
class Variant:
    name: str = BASELINE_NAME
    #: tuning spec files (absolute paths), passed as --iree-codegen-tuning-spec-path (one spec per compile;
    #: several are merged by the variants module before compiling)
    tuning_specs: tuple[str, ...] = ()
    #: extra iree-compile flags, verbatim
    flags: tuple[str, ...] = ()
    #: ("source" | "configuration", executable_name, path) substitutions of single dispatches
    substitutions: tuple[tuple[str, str, str], ...] = ()
    #: --iree-hal-preprocess-executables-with value
    preprocess: str | None = None

    @property
    def is_baseline(self) -> bool:
        return not (self.tuning_specs or self.flags or self.substitutions or self.preprocess)

    def compile_flags(self) -> list[str]:
        flags: list[str] = []
        for spec in self.tuning_specs:
            flags.append(f"--iree-codegen-tuning-spec-path={spec}")
        for kind, name, path in self.substitutions:
            flags.append(f"--iree-hal-substitute-executable-{kind}={name}={path}")
        if self.preprocess:
            flags.append(f"--iree-hal-preprocess-executables-with={self.preprocess}")
        flags.extend(self.flags)
        return flags

    def key_material(self) -> str:
        """Digest of everything about this variant that changes the compiled artifact: the CONTENT of spec and
        substituted files (not just their paths), the flags and the preprocess step."""
        h = hashlib.sha256()
        for spec in self.tuning_specs:
            h.update(b"spec\0" + _file_bytes(spec) + b"\0")
        for kind, name, path in self.substitutions:
            h.update(f"sub\0{kind}\0{name}\0".encode() + _file_bytes(path) + b"\0")
        h.update(("preprocess\0" + (self.preprocess or "")).encode() + b"\0")
        for f in self.flags:
            h.update(b"flag\0" + f.encode() + b"\0")
        return h.hexdigest()

    def describe(self) -> dict:
        return {
            "name": self.name,
            "tuning_specs": list(self.tuning_specs),
            "flags": list(self.flags),
            "substitutions": [list(s) for s in self.substitutions],
            "preprocess": self.preprocess,
        }


BASELINE = Variant()


def _file_bytes(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise VariantError(f"variant file {path}: {e.strerror or e}") from None
