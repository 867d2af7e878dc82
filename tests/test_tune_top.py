"""`boo-tui tune FILE --top N`: the N commands with the largest share of a captured model, what to tune first."""
from __future__ import annotations

import subprocess
import sys

import pytest

from boo_engine.cli.common import UsageError
from boo_engine.cli.tune import top_by_share

FILE = """# boo-tui capture of net.py:make
# boo-tui: calls=2 share=10.0%
gemm -m 8 -n 8 -k 8
# boo-tui: calls=1 share=55.5%
conv -n 1 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 -p 1 -q 1
gemm -m 16 -n 16 -k 16
# boo-tui: calls=3 share=30.0%
layernorm --input 4x64 --normalized_dim 1 -F 1
"""


def test_the_top_commands_by_share_and_what_they_hold(tmp_path):
    f = tmp_path / "net.txt"
    f.write_text(FILE)
    top, held = top_by_share([str(f)], 2)
    assert top == ["conv -n 1 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 -p 1 -q 1",
                   "layernorm --input 4x64 --normalized_dim 1 -F 1"]
    assert held == pytest.approx(85.5)
    assert top_by_share([str(f)], 10)[0][-1] == "gemm -m 8 -n 8 -k 8"     # the unweighted line is never picked


def test_top_without_weights_is_one_line(tmp_path, cli_env):
    f = tmp_path / "plain.txt"
    f.write_text("gemm -m 8 -n 8 -k 8\n")
    with pytest.raises(UsageError, match="has a weight"):
        top_by_share([str(f)], 3)
    p = subprocess.run([sys.executable, "-m", "boo_tui", "tune", str(f), "--top", "3", "--out", str(tmp_path / "o"),
                        "--db", str(tmp_path / "t.db")], env=cli_env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "--top 3" in p.stderr, p.stderr
    bad = subprocess.run([sys.executable, "-m", "boo_tui", "tune", str(f), "--top", "0"], env=cli_env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--top 0: give at least 1" in bad.stderr, bad.stderr
