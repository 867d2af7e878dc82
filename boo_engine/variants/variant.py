"""The Variant: a named compile configuration of a kernel (tuning specs, extra compiler flags, substituted dispatch
sources or configurations, a preprocessing step, the kernel's formulation). The baseline is `Variant()` (BASELINE)."""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..ops.base import DEFAULT_FORMULATION
from ..results import CacheMode
from .common import BASELINE_NAME, BEST_NAME, file_bytes
from .linking import merged_spec_path

#: in the cache key of a kernel built with aligned tiles: a change of the rule's meaning bumps it
ALIGNED_TILES_VERSION = 1


@dataclass(frozen=True)
class Variant:
    name: str = BASELINE_NAME
    #: tuning spec files (absolute paths). IREE takes one --iree-codegen-tuning-spec-path per compile: several
    #: are linked into one file by `merged_spec_path` (first matching spec wins)
    tuning_specs: tuple[str, ...] = ()
    #: extra iree-compile flags, verbatim
    flags: tuple[str, ...] = ()
    #: ("source" | "configuration", executable_name, path) substitutions of single dispatches
    substitutions: tuple[tuple[str, str, str], ...] = ()
    #: --iree-hal-preprocess-executables-with value
    preprocess: str | None = None
    #: kernels (func_name) this variant is meant for; empty = every kernel. Substituted dispatches are named
    #: `main$async_dispatch_N` in EVERY kernel, so a dispatch folder only makes sense for the kernel it was
    #: dumped from: callers should skip a variant whose `applies_to(func_name)` is False.
    kernels: tuple[str, ...] = ()
    #: (func_name, flags) pairs: flags added for that kernel only (after `flags`), e.g. what `boo-tui tune` found
    #: per kernel, in one variant
    kernel_flags: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: (func_name, formulation) pairs: how that kernel is written out (ops' formulations), per kernel
    kernel_formulations: tuple[tuple[str, str], ...] = ()
    #: (func_name, "source" | "configuration", executable_name, path): a dispatch substituted in that kernel only
    #: (every kernel names its dispatches `main$async_dispatch_N`), e.g. the configured dispatch `boo-tui tune`
    #: found for a cuda kernel (IREE 3.13's cuda pipeline ignores tuning specs)
    kernel_substitutions: tuple[tuple[str, str, str, str], ...] = ()
    #: how every kernel is written for export (OpSignature.formulations(), e.g. "fwdconv": a backward conv as
    #: forward convolutions) unless `kernel_formulations` names another; None (or "default") is the signature's
    #: reference. A kernel without it fails to compile, with one line naming the formulations it has.
    formulation: str | None = None
    #: "cold" / "warm": measure this variant with that --cache-mode (None: the run's). Not a compile setting: a
    #: variant of only `cache=cold` runs the baseline's kernel, flushed, so cold vs warm is a compared column
    cache_mode: CacheMode | None = None
    #: the build this variant's change applies to: "boo" (iree-turbine's export of the op and BOO's flags) or
    #: "ours" (our export with this machine's per-op defaults: what `boo-tui tune` measures and writes); None:
    #: the run's build (`Target.build`: "boo" in a run the front ends start, so a variant is the baseline plus
    #: its change)
    base: str | None = None
    #: the `best` column (BEST): "?" until the session resolves it per kernel, then what chose the kernel's
    #: configuration ("rules", "table", "tune N"). "" for every other variant. Not in the key: it changes no
    #: kernel (the configuration it chose does).
    best: str = ""
    #: the kernel's root op takes workgroup tiles that are whole vector tiles, by rule (the best column on the CPU;
    #: cpu_defaults.rules.rule_aligned_distribution): a first compile pass reads IREE's configuration, a tuning
    #: spec written from it sets the aligned tiles (compile/aligned.py)
    aligned_tiles: bool = False

    @property
    def is_baseline(self) -> bool:
        """No spec, flag, substitution, preprocess step, formulation (even "default", named on purpose), cache
        mode or build of its own."""
        return not (self.tuning_specs or self.flags or self.substitutions or self.preprocess or self.kernel_flags
                    or self.kernel_formulations or self.kernel_substitutions or self.formulation is not None
                    or self.cache_mode is not None or self.base is not None or self.best
                    or self.aligned_tiles)

    def flags_for(self, func_name: str, path_of: Callable[[str], str] = str) -> list[str]:
        """The kernel-specific flags of this variant for `func_name` (after compile_flags()): its substituted
        dispatches, then its flags. `path_of` as in `compile_flags`."""
        return ([_substitute_flag(kind, exe, path_of(path))
                 for name, kind, exe, path in self.kernel_substitutions if name == func_name]
                + [f for name, flags in self.kernel_flags if name == func_name for f in flags])

    def substitutions_for(self, func_name: str) -> list[tuple[str, str, str]]:
        """Every (kind, executable, path) substituted when compiling `func_name`: the variant's, then its own."""
        return list(self.substitutions) + [(kind, exe, path) for name, kind, exe, path in self.kernel_substitutions
                                           if name == func_name]

    def formulation_for(self, func_name: str) -> str | None:
        """How kernel `func_name` is to be written out: its `kernel_formulations` entry, else `formulation` (None:
        the op's default formulation)."""
        return next((f for name, f in self.kernel_formulations if name == func_name), self.formulation)

    def export_formulation(self, func_name: str) -> str:
        """The formulation kernel `func_name` is exported with ("default" when none is set)."""
        return self.formulation_for(func_name) or DEFAULT_FORMULATION

    @property
    def named_kernels(self) -> tuple[str, ...]:
        """Every kernel (func_name) this variant names: its scope and its per-kernel tables, once each, in order."""
        names = [*self.kernels, *(n for n, _ in self.kernel_flags), *(n for n, _ in self.kernel_formulations),
                 *(n for n, *_ in self.kernel_substitutions)]
        return tuple(dict.fromkeys(names))

    def applies_to(self, func_name: str) -> bool:
        """False when this variant is scoped to other kernels (a dispatch folder dumped from another kernel)."""
        return not self.kernels or func_name in self.kernels

    def compile_flags(self, path_of: Callable[[str], str] = str) -> list[str]:
        """The iree-compile flags this variant adds (several specs: linked into one file first). `path_of` names
        the variant's own files (spec, substituted dispatches) in them: the path itself, or for the cache key a
        placeholder (their content is in `key_material`)."""
        flags: list[str] = []
        if len(self.tuning_specs) == 1:
            flags.append(f"--iree-codegen-tuning-spec-path={path_of(self.tuning_specs[0])}")
        elif self.tuning_specs:
            flags.append(f"--iree-codegen-tuning-spec-path={path_of(merged_spec_path(self.tuning_specs))}")
        for kind, name, path in self.substitutions:
            flags.append(_substitute_flag(kind, name, path_of(path)))
        if self.preprocess:
            flags.append(f"--iree-hal-preprocess-executables-with={self.preprocess}")
        flags.extend(self.flags)
        return flags

    def key_material(self, func_name: str | None = None) -> str:
        """Digest of everything about this variant that changes the compiled artifact: the CONTENT of spec and
        substituted files (not just their paths), the flags, the preprocess step and the formulation (the cache's
        export-free index would otherwise find the default formulation's kernel).

        With `func_name`, what the cache keys that kernel by: only what builds IT (the content of the specs and of
        the dispatches substituted in it, the preprocess step, its formulation), its flags being in the key
        already, in order (compile.flags.key_flags). Two variants that build a kernel the same way, such as a
        tune's candidate and the tuned.toml that names it, then share its entry; a kernel's entry does not
        change when the variant also tunes other kernels."""
        if func_name is not None:
            return self._kernel_key_material(func_name)
        h = hashlib.sha256()
        if (self.formulation or DEFAULT_FORMULATION) != DEFAULT_FORMULATION:  # "default": the baseline's kernel
            h.update(f"formulation\0{self.formulation}\0".encode())
        for spec in self.tuning_specs:
            h.update(b"spec\0" + file_bytes(spec) + b"\0")
        for kind, name, path in self.substitutions:
            h.update(f"sub\0{kind}\0{name}\0".encode() + file_bytes(path) + b"\0")
        h.update(("preprocess\0" + (self.preprocess or "")).encode() + b"\0")
        for f in self.flags:
            h.update(b"flag\0" + f.encode() + b"\0")
        for name, flags in self.kernel_flags:
            h.update(f"kernel\0{name}\0".encode() + "\0".join(flags).encode() + b"\0")
        for name, form in self.kernel_formulations:
            h.update(f"formulation\0{name}\0{form}".encode() + b"\0")
        for name, kind, exe, path in self.kernel_substitutions:
            h.update(f"ksub\0{name}\0{kind}\0{exe}\0".encode() + file_bytes(path) + b"\0")
        if self.aligned_tiles:
            h.update(f"aligned-tiles\0{ALIGNED_TILES_VERSION}\0".encode())
        return h.hexdigest()

    def _kernel_key_material(self, func_name: str) -> str:
        h = hashlib.sha256()
        form = self.export_formulation(func_name)
        if form != DEFAULT_FORMULATION:
            h.update(f"formulation\0{form}\0".encode())
        for spec in self.tuning_specs:
            h.update(b"spec\0" + file_bytes(spec) + b"\0")
        for kind, name, path in self.substitutions_for(func_name):
            h.update(f"sub\0{kind}\0{name}\0".encode() + file_bytes(path) + b"\0")
        h.update(("preprocess\0" + (self.preprocess or "")).encode() + b"\0")
        if self.aligned_tiles:
            h.update(f"aligned-tiles\0{ALIGNED_TILES_VERSION}\0".encode())
        return h.hexdigest()

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "tuning_specs": list(self.tuning_specs),
            "flags": list(self.flags),
            "substitutions": [list(s) for s in self.substitutions],
            "preprocess": self.preprocess,
        }
        if self.kernels:
            d["kernels"] = list(self.kernels)
        if self.kernel_flags:
            d["kernel_flags"] = {name: list(flags) for name, flags in self.kernel_flags}
        if self.kernel_formulations:
            d["kernel_formulations"] = dict(self.kernel_formulations)
        if self.kernel_substitutions:
            d["kernel_substitutions"] = [list(s) for s in self.kernel_substitutions]
        if self.formulation is not None:
            d["formulation"] = self.formulation
        if self.cache_mode is not None:
            d["cache_mode"] = self.cache_mode
        if self.base is not None:
            d["base"] = self.base
        if self.best:
            d["best"] = self.best
        if self.aligned_tiles:
            d["aligned_tiles"] = True
        return d

    @classmethod
    def from_description(cls, d: dict[str, Any]) -> Variant:
        """The variant `describe()` wrote (e.g. into a run's stored config; its spec files must still exist)."""
        subs = tuple((str(k), str(n), str(p)) for k, n, p in d.get("substitutions") or ())
        return cls(name=str(d.get("name") or BASELINE_NAME), tuning_specs=tuple(d.get("tuning_specs") or ()),
                   flags=tuple(d.get("flags") or ()), substitutions=subs, preprocess=d.get("preprocess"),
                   kernels=tuple(d.get("kernels") or ()),
                   kernel_flags=tuple((str(k), tuple(v)) for k, v in (d.get("kernel_flags") or {}).items()),
                   kernel_formulations=tuple((str(k), str(v))
                                             for k, v in (d.get("kernel_formulations") or {}).items()),
                   kernel_substitutions=tuple((str(f), str(k), str(n), str(p))
                                              for f, k, n, p in d.get("kernel_substitutions") or ()),
                   formulation=d.get("formulation") or None, cache_mode=d.get("cache_mode") or None,
                   base=d.get("base") or None, best=str(d.get("best") or ""),
                   aligned_tiles=bool(d.get("aligned_tiles")))


def _substitute_flag(kind: str, executable: str, path: str) -> str:
    return f"--iree-hal-substitute-executable-{kind}={executable}={path}"


BASELINE = Variant()
#: the `best` column: every kernel in the best known configuration for this machine, built our way. "?" until the
#: session resolves it per kernel (session/best.py): then a Variant of this name with that kernel's formulation
#: and flags, and in `best` what chose them
BEST = Variant(name=BEST_NAME, base="ours", best="?")
