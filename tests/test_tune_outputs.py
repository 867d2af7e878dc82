"""What a tune leaves behind must build what it says: a tuned.toml with no winner is the compiler's default."""
from __future__ import annotations

import re
from pathlib import Path

from boo_engine.commands import parse_command
from boo_engine.compile.cache import KernelCache
from boo_engine.compile.pool import compile_signature
from boo_engine.tune.report import write_outputs
from boo_engine.variants import load_variants_file


def _configs(art) -> str:
    """The kernel's dumped configurations, without the cache paths they mention."""
    return "".join(re.sub(r"/\S*configs\S*", "", p.read_text()) for p in sorted(Path(art.configs_dir).glob("*.mlir")))


def test_a_tuned_toml_without_a_winner_builds_the_default_kernel(tmp_path):
    """IREE 3.13 compiles at O0 by default; the no-winner tuned.toml named O2, which builds another gemm kernel
    (measured on cuda and cpu), so re-measuring it compared two kernels and an H200 called one 'faster'."""
    write_outputs(tmp_path / "out", {}, {}, target="cpu", settings={})
    (tuned,) = load_variants_file(tmp_path / "out" / "tuned.toml")
    assert not tuned.is_baseline
    cache = KernelCache(tmp_path / "cache")
    sig = parse_command("gemm --a_w 256 --a_h 512 --b_w 512")
    base = compile_signature(sig, "cpu", cache=cache)
    again = compile_signature(sig, "cpu", tuned, cache=cache)
    assert again.key != base.key and _configs(again) == _configs(base)
