"""Did a tuning spec change the kernel? A spec that matched nothing compiles fine and changes nothing, so after
compiling, the dumped executable configurations (--iree-hal-dump-executable-configurations-to) are read."""
from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .common import SPEC_MARKER
from .mlir_text import config_signature, executable_name, lowering_configs, resolve_aliases
from .specs import spec_has_marker


@dataclass(frozen=True)
class AppliedCheck:
    applied: bool
    detail: str
    #: executables whose configuration shows the spec (marker, or a configuration differing from the baseline)
    dispatches: tuple[str, ...] = ()


NOT_APPLIED = "spec not applied: matched no dispatch"


def spec_applied(variant_configs_dir: str | os.PathLike[str] | None,
                 baseline_configs_dir: str | os.PathLike[str] | None, spec_paths: Sequence[str]) -> AppliedCheck:
    """Decide from the dumped executable configurations (--iree-hal-dump-executable-configurations-to) whether
    the spec(s) changed the kernel. Evidence, strongest first:
    1. SPEC_MARKER on an op in the variant's configurations -> applied (it survives into 3.13's dumps);
    2. every spec carries the marker but none shows -> not applied;
    3. with a baseline: a lowering_config / translation_info differing from the baseline's -> applied;
    4. without one: one of the specs' lowering_configs appearing in the dumps -> applied.
    A spec that matched nothing comes out `applied=False`, detail "spec not applied: matched no dispatch"."""
    if not spec_paths:
        return AppliedCheck(True, "no tuning spec")
    variant = _read_configs(variant_configs_dir)
    if not variant:
        return AppliedCheck(False, f"cannot tell: no executable configurations dumped in {variant_configs_dir}")
    marked = tuple(exe for exe, text in variant.items() if SPEC_MARKER in text)
    if marked:
        return AppliedCheck(True, f"spec applied to {len(marked)} of {len(variant)} dispatches: "
                                  f"{', '.join(marked)}", marked)
    if all(spec_has_marker(s) for s in spec_paths):
        return AppliedCheck(False, NOT_APPLIED)
    baseline = _read_configs(baseline_configs_dir)
    if baseline:
        changed = tuple(exe for exe, text in variant.items()
                        if config_signature(text) != config_signature(baseline.get(exe, "")))
        if changed:
            return AppliedCheck(True, f"configuration differs from the baseline in {len(changed)} of "
                                      f"{len(variant)} dispatches: {', '.join(changed)}", changed)
        return AppliedCheck(False, NOT_APPLIED)
    wanted: set[str] = set()
    for s in spec_paths:
        try:
            wanted |= set(lowering_configs(resolve_aliases(Path(s).read_text(errors="replace"))))
        except OSError:
            pass
    hits = tuple(exe for exe, text in variant.items() if wanted & set(lowering_configs(text)))
    if hits:
        return AppliedCheck(True, f"the spec's lowering_config appears in {', '.join(hits)}", hits)
    return AppliedCheck(False, NOT_APPLIED)


def _read_configs(folder: str | os.PathLike[str] | None) -> dict[str, str]:
    """{executable name: configuration text with aliases resolved} for every dump in `folder`."""
    if not folder or not Path(folder).is_dir():
        return {}
    out: dict[str, str] = {}
    for f in sorted(Path(folder).glob("*.mlir")):
        try:
            text = resolve_aliases(f.read_text(errors="replace"))
        except OSError:
            continue
        out[executable_name(text) or f.stem] = text
    return out
