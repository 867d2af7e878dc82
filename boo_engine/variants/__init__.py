"""Variants: named compile configurations of the same kernel (tuning specs, extra compiler flags, substituted
dispatch sources or configurations, a preprocessing step). The baseline is `Variant()`.

Why this package does more than hold data: every way of changing a kernel has a SILENT failure mode in IREE 3.13,
and a benchmark that quietly measures the baseline twice is worse than no benchmark. So:
- a spec is pre-flighted (`iree-opt` parses and verifies it in ~0.2 s) and must have an entry point, because a
  spec without one compiles fine and is ignored;
- after compiling, `spec_applied()` reads the dumped executable configurations: a spec that matched nothing
  also compiles fine and changes nothing;
- a dispatch folder only substitutes the files the user actually edited (a dump manifest records the
  originals), because substituting an unchanged configuration next to an edited source silently discards the
  source edit (the configuration substitution happens later in the pipeline and wins);
- flags are checked against the compiler's own option list, because a typo is otherwise one compile error per
  kernel.

IREE takes ONE `--iree-codegen-tuning-spec-path`; several specs in one variant are linked into one with IREE's
own `iree-codegen-link-tuning-specs` pass (`merged_spec_path`), in the order given (the first matching spec wins
for an op).

Modules, each importing only those listed before it: common (constants, naming), mlir_text (reading dumped
executables), specs (one spec: pre-flight, marker, backend), linking (several specs in one), model (Variant,
BASELINE), dispatches (dump folders: substitutions, manifest), applied (did the spec apply?), preflight (a whole
variant), parsing (--variant, TOML files, the environment). None imports the compile layer: dumping dispatches is
a compile and lives there: `boo_engine.compile.dump.dump_dispatches` (or `CompilePool.submit_dump`).
"""
from __future__ import annotations

from .applied import NOT_APPLIED, AppliedCheck, spec_applied
from .common import BASELINE_NAME, BEST_NAME, DUMP_MANIFEST, KINDS, SPEC_MARKER, SPEC_SUFFIXES, TUNING_SPEC_ENV
from .dispatches import read_manifest, refuse_to_clobber_edits, substitutions_from_dir
from .linking import merged_spec_path, spec_cache_dir
from .parsing import build_variants, load_variants_file, parse_variant_arg, variant_from_env
from .preflight import check_named_kernels, preflight_target, preflight_variant
from .specs import preflight_spec, spec_backend, spec_has_marker
from .variant import BASELINE, BEST, Variant

__all__ = [
    "BASELINE",
    "BASELINE_NAME",
    "BEST",
    "BEST_NAME",
    "DUMP_MANIFEST",
    "KINDS",
    "NOT_APPLIED",
    "SPEC_MARKER",
    "SPEC_SUFFIXES",
    "TUNING_SPEC_ENV",
    "AppliedCheck",
    "Variant",
    "build_variants",
    "check_named_kernels",
    "load_variants_file",
    "merged_spec_path",
    "parse_variant_arg",
    "preflight_spec",
    "preflight_target",
    "preflight_variant",
    "read_manifest",
    "refuse_to_clobber_edits",
    "spec_applied",
    "spec_backend",
    "spec_cache_dir",
    "spec_has_marker",
    "substitutions_from_dir",
    "variant_from_env",
]
