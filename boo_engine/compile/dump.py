"""Dumping a kernel's dispatches for editing (`--dump-dispatches`): a compile like any other, run through
compile.compiler_run (own process group, timeout kills the group, stall detection), usually as a CompilePool job
(`CompilePool.submit_dump`). The folder it writes and how an edited folder becomes a variant: variants.dispatches.
"""
from __future__ import annotations

import glob
import os
import shutil
import tempfile
from pathlib import Path

from .. import iree_tools
from ..errors import CompileError
from ..ops.base import OpSignature
from ..targets import Target
from ..variants import BASELINE, Variant
from ..variants.dispatches import install_dump, refuse_to_clobber_edits
from .build import DEFAULT_TIMEOUT_S
from .compiler_run import STALL_S, run_compiler
from .flags import as_target, compile_flags, run_flags


def dump_dispatches(sig: OpSignature, target: Target | str, out_dir: str | os.PathLike[str],
                    variant: Variant = BASELINE, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                    stall_s: float = STALL_S) -> list[Path]:
    """Compile `sig` for `target` with `variant` and write every dispatch's source (`module_<exe>.mlir`) and
    chosen configuration (`configured_module_<exe>.mlir`) into `out_dir/<func_name>/`, plus a manifest
    (`boo-dump.json`: kernel, target, flags, digests). Edit one file, then measure `--variant NAME=<that
    folder>/`: only edited files are substituted. Refuses to overwrite a folder holding edits. Returns the
    written .mlir files. Raises CompileError when the compile fails, times out or stalls (the compiler and
    everything it started are killed), VariantError for folder problems."""
    tgt = as_target(target)
    variant = variant or BASELINE
    dest = Path(out_dir).expanduser().resolve() / sig.func_name
    refuse_to_clobber_edits(dest)
    flags = compile_flags(sig, tgt, variant)
    from .export import export_mlir  # imports iree.compiler and torch: only when a dump is asked for

    mlir = export_mlir(sig, variant.export_formulation(sig.func_name))
    exe = iree_tools.tool_path("iree-compile", CompileError)
    with tempfile.TemporaryDirectory(prefix=_tmp_prefix(os.getpid())) as tmp:
        t = Path(tmp)
        (t / "in.mlir").write_text(mlir)
        cmd = [exe, str(t / "in.mlir"), *flags, *run_flags(flags),
               f"--iree-hal-dump-executable-sources-to={t / 'd'}",
               f"--iree-hal-dump-executable-configurations-to={t / 'd'}", "-o", str(t / "out.vmfb")]
        run_compiler(cmd, cmd, sig.func_name, timeout_s, stall_s=stall_s)
        files = sorted((t / "d").glob("*.mlir"))
        return install_dump(files, dest, func_name=sig.func_name, target_name=tgt.name, variant=variant,
                            flags=flags)


def _tmp_prefix(pid: int) -> str:
    return f"boo-dump-{pid}-"


def sweep_dump_leftovers(pid: int) -> None:
    """Remove the temporary folders of dumps run by process `pid`, which was killed mid-dump (a cancel)."""
    for d in glob.glob(os.path.join(glob.escape(tempfile.gettempdir()), _tmp_prefix(pid) + "*")):
        shutil.rmtree(d, ignore_errors=True)
