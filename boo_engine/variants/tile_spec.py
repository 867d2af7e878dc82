"""Tuning specs written by the tuner (IREE 3.13 transform-dialect syntax).

A spec holds one entry per configured op: a matcher (`transform.iree.match.contraction` or
`transform.iree.match.convolution`, pinned to the op's element types, indexing maps and EVERY loop size, so it
never configures another kernel's op) and the `compilation_info` to set. The action also sets the
`__tuning_spec_applied__` marker that `variants.applied.spec_applied` looks for, so a candidate whose matcher
missed is caught, never measured as if it had applied.

One entry per file while searching (a candidate); every winner in one file at the end (`tuned.mlir`).
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .common import SPEC_MARKER
from .root_op import RootOp

_CONV_GROUPS = ("batch", "output_image", "output_channel", "filter", "input_channel", "depth")
_CONTRACTION_GROUPS = ("batch", "m", "n", "k")


@dataclass(frozen=True)
class SpecEntry:
    """One matcher and the configuration it sets, with the comment lines written above it."""

    name: str                 # the matcher's symbol name (unique within a spec)
    root: RootOp
    compilation_info: str     # the #iree_codegen.compilation_info<...> attribute
    comment: tuple[str, ...] = ()


def cpu_compilation_info(root: RootOp, tiles: Mapping[str, Sequence[int]]) -> str:
    """A llvm-cpu compilation_info: the given tile lists and the translation_info the compiler chose for the
    op (its pipeline and options, e.g. loop peeling)."""
    fields = ", ".join(f"{name} = [{', '.join(str(int(t)) for t in value)}]"
                       for name, value in sorted(tiles.items()))
    translation = root.translation or (
        f"#iree_codegen.translation_info<pipeline = #iree_cpu.pipeline<{root.pipeline or 'DoubleTilingExpert'}>>")
    return (f"#iree_codegen.compilation_info<lowering_config = #iree_cpu.lowering_config<{fields}>, "
            f"translation_info = {translation}>")


def gpu_compilation_info(fields: Mapping[str, str], translation: str) -> str:
    """A GPU compilation_info: an `#iree_gpu.lowering_config` of these entries (name -> value verbatim, "" for
    a unit attribute; printed in name order, as IREE prints them) and the translation_info verbatim."""
    body = ", ".join(name if value == "" else f"{name} = {value}" for name, value in sorted(fields.items()))
    return (f"#iree_codegen.compilation_info<lowering_config = #iree_gpu.lowering_config<{{{body}}}>, "
            f"translation_info = {translation}>")


def matcher_text(entry: SpecEntry) -> str:
    root = entry.root
    lhs, rhs, out = root.elem_types
    maps = ",\n                          ".join(f"affine_map<{m}>" for m in root.maps)
    groups = root.dim_groups()
    names: tuple[str, ...]
    if root.kind == "contraction":
        names = _CONTRACTION_GROUPS
        results = "%batch, %m, %n, %k"
        op = "transform.iree.match.contraction"
    else:
        names = _CONV_GROUPS
        results = "%batch, %output_image, %output_channel, %filter, %input_channel, %depth, %strides, %dilations"
        op = "transform.iree.match.convolution"
    pins = "\n".join(
        f"    transform.iree.match.dims_equal %{g}, [{', '.join(str(root.bounds[d]) for d in groups[g])}]"
        " : !transform.param<i64>" for g in names)
    return (
        f"  transform.named_sequence @{entry.name}(%op: !transform.any_op {{transform.readonly}})\n"
        f"      -> (!transform.any_op, !transform.any_param) {{\n"
        f"    {results} = {op} %op,\n"
        f"        lhs_type = {lhs}, rhs_type = {rhs}, output_type = {out},\n"
        f"        indexing_maps = [{maps}]\n"
        f"        : !transform.any_op -> !transform.param<i64>\n"
        f"{pins}\n"
        f"    %config = transform.param.constant {entry.compilation_info} -> !transform.any_param\n"
        f"    transform.yield %op, %config : !transform.any_op, !transform.any_param\n"
        f"  }}\n")


def spec_module(entries: Sequence[SpecEntry], header: Sequence[str] = ()) -> str:
    """A whole spec file: the shared action, every entry's matcher, and the entry point that tries them in
    order (the first match wins)."""
    if not entries:
        raise ValueError("a tuning spec needs at least one entry")
    names = [e.name for e in entries]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate matcher names in a spec: {names}")
    lines = [f"// {h}" if h else "//" for h in header]
    lines.append("module attributes {transform.with_named_sequence,"
                 " iree_codegen.tuning_spec_with_default_entrypoint} {")
    lines.append(
        "  transform.named_sequence @apply_op_config(%op: !transform.any_op {transform.readonly},\n"
        "                                            %config: !transform.any_param {transform.readonly}) {\n"
        '    transform.annotate %op "compilation_info" = %config : !transform.any_op, !transform.any_param\n'
        f'    transform.annotate %op "{SPEC_MARKER}" : !transform.any_op\n'
        "    transform.yield\n"
        "  }\n")
    for e in entries:
        lines.extend(f"  // {c}" if c else "  //" for c in e.comment)
        lines.append(matcher_text(e))
    pairs = ",\n        ".join(f"@{n} -> @apply_op_config" for n in names)
    lines.append(
        "  transform.named_sequence @__kernel_config(%variant_op: !transform.any_op {transform.consumed})"
        " -> !transform.any_op\n"
        "      attributes {iree_codegen.tuning_spec_entrypoint} {\n"
        "    %res = transform.foreach_match in %variant_op\n"
        f"        {pairs}\n"
        "      : (!transform.any_op) -> !transform.any_op\n"
        "    transform.yield %res : !transform.any_op\n"
        "  }\n"
        "}\n")
    return "\n".join(lines)


def symbol(text: str) -> str:
    """A valid MLIR symbol name made of `text`."""
    s = re.sub(r"[^A-Za-z0-9_]", "_", text)
    return s if s[:1].isalpha() or s[:1] == "_" else f"m_{s}"
