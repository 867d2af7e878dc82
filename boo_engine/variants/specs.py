"""One tuning spec file: is it one IREE would use (pre-flight through iree-opt), does it mark what it configures,
which backend's configurations does it set."""
from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path

from .. import iree_tools
from ..errors import VariantError
from .common import SPEC_MARKER


def iree_opt() -> str:
    """The iree-opt of the installed compiler wheel (else PATH), or VariantError."""
    return iree_tools.tool_path("iree-opt", VariantError)


def preflight_spec(path: str | os.PathLike[str]) -> None:
    """Fail early, with one line naming the file and the compiler's reason, on a spec IREE would reject OR
    silently ignore: missing/unreadable, unparsable, invalid transform IR (iree-opt verifies it in ~0.2 s; the
    compiler would run the same verifier at compile time, once per kernel), or no entry point (IREE compiles
    such a spec without a word and applies nothing). Results are cached per file content."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except IsADirectoryError:
        raise VariantError(f"tuning spec {p}: is a directory, not a .mlir file") from None
    except OSError as e:
        raise VariantError(f"tuning spec {p}: {e.strerror or e}") from None
    problem = _spec_problem(str(p), hashlib.sha256(data).hexdigest())
    if problem:
        raise VariantError(f"tuning spec {p}: {problem}")


@functools.lru_cache(maxsize=256)
def _spec_problem(path: str, _digest: str) -> str | None:
    proc = iree_tools.run_tool([iree_opt(), "--mlir-print-local-scope", path], error=VariantError)
    if proc.returncode != 0:
        return compiler_error(proc.stderr)
    text = proc.stdout
    if "transform.with_named_sequence" not in text:
        return "not a transform library: the top module needs the transform.with_named_sequence attribute"
    if "iree_codegen.tuning_spec_entrypoint" not in text:
        return ("no entry point: IREE would silently ignore this spec; add iree_codegen.tuning_spec_with_default_"
                "entrypoint to the module and a @__kernel_config named sequence with the "
                "iree_codegen.tuning_spec_entrypoint attribute")
    return None


def compiler_error(stderr: str) -> str:
    """iree-opt's first error as one line, its location shortened to `line L:C: `."""
    return iree_tools.first_error(stderr, located=True, limit=None, empty="rejected by the compiler (no message)")


def spec_has_marker(path: str | os.PathLike[str]) -> bool:
    """Does the spec annotate what it configures with SPEC_MARKER (the reliable "did it apply?" signal)?"""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return False
    code = re.sub(r"//[^\n]*", "", text)  # a comment that mentions the marker does not set it
    return re.search(r'transform\.annotate\s+%[\w$.-]+\s+"' + SPEC_MARKER + '"', code) is not None


def spec_backend(path: str | os.PathLike[str]) -> str | None:
    """"cpu" or "gpu" when every configuration the spec sets is of that kind (#iree_cpu / #iree_gpu
    lowering_config), None when it sets neither or both."""
    try:
        code = re.sub(r"//[^\n]*", "", Path(path).read_text(errors="replace"))
    except OSError:
        return None
    cpu, gpu = "#iree_cpu.lowering_config" in code, "#iree_gpu.lowering_config" in code
    return "cpu" if cpu and not gpu else "gpu" if gpu and not cpu else None
