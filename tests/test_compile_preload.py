"""preload fills the cache for a target (cross-compiles included) and reports compiled / cached / failed."""
from __future__ import annotations

from boo_engine.commands import parse_invocation
from boo_engine.compile.cache import KernelCache
from boo_engine.compile.pool import lookup_cached
from boo_engine.compile.preload import format_summary, preload
from boo_engine.variants import BASELINE, Variant


def test_preload_then_everything_is_cached(tmp_path):
    cache = KernelCache(tmp_path)
    cmds = [parse_invocation("gemm --a_w 4 --a_h 8 --b_w 4"), "conv -n 1 -c 4 -H 6 -W 6 -k 4 -y 1 -x 1",
            "conv -n 1 -c 4 -H 6 -W 6 -k 4 -y 1 -x 1 --bogus 3"]
    bad = Variant(name="bad", flags=("--iree-no-such-flag",))
    seen = []
    s = preload(cmds, "hip:gfx942", (BASELINE, bad), workers=2, cache=cache,
                progress=lambda done, total, item: seen.append((done, total, item.status)))
    assert len(s.compiled) == 2 and len(s.cached) == 0
    assert len(s.failed) == 3  # the unparsable command + the bad variant of each good command
    assert any("bogus" in i.error for i in s.failed) and any("Unknown command line" in i.error or
                                                             "iree-compile failed" in i.error for i in s.failed)
    assert seen[-1][0] == seen[-1][1] == 5
    text = format_summary(s)
    assert "2 compiled, 0 already cached, 3 failed" in text and text.count("failed  ") == 3
    sig = cmds[0].signature
    assert lookup_cached(sig, "hip:gfx942", cache=KernelCache(tmp_path)) is not None
    again = preload(cmds[:2], "hip:gfx942", cache=KernelCache(tmp_path), workers=1)
    assert len(again.cached) == 2 and not again.compiled and not again.failed
