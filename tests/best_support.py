"""Shared by tests/test_best_column.py and tests/test_aligned_tiles.py: commands run with BOO's build and the best
column side by side."""
from __future__ import annotations

from pathlib import Path

from boo_engine.config import SessionConfig
from boo_engine.results import DONE, IREE
from boo_engine.session import Session
from boo_engine.variants import BASELINE, BEST


def boo_beside_best(tmp_path: Path, *commands: str) -> list:
    """The commands run with BOO's build and the best column side by side (IREE only, real compiles and kernels):
    every job, each asserted done with numerics passing against torch."""
    cfg = SessionConfig(target="cpu", build="boo", variants=[BASELINE, BEST], backends=(IREE,), iters=5,
                        rounds=1, db_path=str(tmp_path / "r.db"), cache_dir=str(tmp_path / "cache"))
    with Session(cfg) as s:
        for c in commands:
            s.add_command(c)
        s.start()
        s.wait()
        jobs = list(s.jobs.values())
    assert len(jobs) == 2 * len(commands)
    for r in jobs:
        assert r.status == DONE and r.numerics is not None and r.numerics.verdict == "pass", (r.variant, r.error)
    return jobs
