"""Aligned workgroup tiles (`Variant.aligned_tiles`, the best column on the CPU): a first iree-compile pass that
stops once the executables are configured, the root op's configuration read from its dump, and, where IREE's
workgroup (distribution) tiles are not whole vector tiles, a tuning spec for that op alone with the tiles
`cpu_defaults.rules.rule_aligned_distribution` gives. The spec pins the op's types, maps and every loop size
(variants/tile_spec.py), so it configures nothing else; every other tile IREE chose stays as it chose it.

The first pass costs ~0.2 s (no code generation). Where it fails, finds no root op or finds the tiles aligned
already, the kernel is built as IREE configures it, with no spec.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from ..cpu_defaults.rules import rule_aligned_distribution
from ..errors import CompileError
from ..variants.root_op import RootOp, read_root
from ..variants.tile_spec import SpecEntry, cpu_compilation_info, spec_module, symbol
from .compiler_run import run_compiler

#: the spec's file name in a cache entry (its compile_command.sh names it there)
ALIGNED_SPEC = "aligned_tiles.mlir"
#: the first pass's budget: it configures, it does not generate code
FIRST_PASS_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class AlignedTiles:
    """What the first pass found and the spec that aligns it."""

    root: RootOp
    distribution: tuple[int, ...]     # the aligned tiles (IREE's are root.tiles["distribution"])
    spec: str                         # the tuning spec's text

    def describe(self) -> str:
        before = list(self.root.tiles.get("distribution", ()))
        return (f"{self.root.op_name} {'x'.join(map(str, self.root.bounds))}: workgroup tiles {before} -> "
                f"{list(self.distribution)}")


def aligned_tiles(root: RootOp | None) -> AlignedTiles | None:
    """The spec that aligns `root`'s workgroup tiles, or None (no root op, no tiles to align, aligned already)."""
    if root is None:
        return None
    dist, vec = root.tiles.get("distribution"), root.tiles.get("vector_common_parallel")
    if not dist or not vec or len(dist) != root.rank or len(vec) != root.rank:
        return None
    new = rule_aligned_distribution(root.bounds, root.parallel_dims(), dist, vec)
    if new is None:
        return None
    tiles = {**root.tiles, "distribution": new}
    name = symbol(f"aligned_{root.op_name.replace('linalg.', '')}_{'x'.join(map(str, root.bounds))}")
    info = cpu_compilation_info(root, tiles)
    entry = SpecEntry(name=name, root=root, compilation_info=info,
                      comment=(f"{root.op_name} {'x'.join(map(str, root.bounds))}: IREE's workgroup tiles "
                               f"{list(dist)} are not whole vector tiles {list(vec)}",))
    header = ("boo-tui: the root op's workgroup tiles aligned to its vector tiles (the best column's rule,",
              "cpu_defaults.rules.rule_aligned_distribution); every other tile as IREE chose it.")
    return AlignedTiles(root=root, distribution=new, spec=spec_module([entry], header))


def first_pass(exe: str, mlir_path: Path, flags: list[str], workdir: Path, func: str,
               timeout_s: float = FIRST_PASS_TIMEOUT_S) -> AlignedTiles | None:
    """Run iree-compile up to the configured executables (dumped into `workdir`) and return what aligns the root
    op's tiles, or None. A failing first pass is None: the real compile reports the kernel's own error."""
    dump = workdir / "first-pass"
    try:
        dump.mkdir(parents=True, exist_ok=True)
        cmd = [exe, str(mlir_path), *flags, "--compile-to=executable-configurations",
               f"--iree-hal-dump-executable-configurations-to={dump}", "-o", str(workdir / "first-pass.mlir")]
        run_compiler(cmd, cmd, func, timeout_s, retries=0)
        return aligned_tiles(read_root(dump))
    except (CompileError, OSError):
        return None
    finally:
        shutil.rmtree(dump, ignore_errors=True)
        (workdir / "first-pass.mlir").unlink(missing_ok=True)
