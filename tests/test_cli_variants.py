"""Variants through the headless CLI, end to end with real specs from tuning_specs/: the regression exit code and
"spec not applied" visible in every output (never presented as a tuned result)."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "tuning_specs"
GEMM = "gemm --a_w 256 --a_h 512 --b_w 512"


def test_regression_exit_code_and_spec_not_applied(tmp_path):
    env = dict(os.environ, BOO_CACHE_DIR=str(tmp_path / "cache"))
    args = [GEMM, "--backend", "iree", "--iter", "20", "--db", str(tmp_path / "r.db"),
            "--variant", f"slow={SPECS / 'cpu_gemm_256x512x512_slow.mlir'}",
            "--variant", f"none={SPECS / 'cpu_matches_nothing.mlir'}",
            "--export", "cmp.csv", "--export", "cmp.md", "--export", "cmp.json"]
    p = subprocess.run([sys.executable, "-m", "boo_tui", *args, "--fail-on-regression", "5"], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 3, p.stderr
    assert "regression:" in p.stderr and "[slow]" in p.stderr and "[none]" not in p.stderr.split("regression:")[-1]

    rows = {r["variant"]: r for r in csv.DictReader(open(tmp_path / "cmp.csv"))}
    assert rows["slow"]["verdict"] == "slower" and rows["slow"]["spec_applied"] == "true"
    assert float(rows["slow"]["ratio_vs_baseline"]) > 1.5
    assert rows["none"]["spec_applied"] == "false" and "spec not applied" in rows["none"]["error"]
    assert rows["none"]["verdict"] == "" and rows["none"]["ratio_vs_baseline"] == ""
    md = (tmp_path / "cmp.md").read_text()
    assert "spec not applied" in md
    data = json.loads((tmp_path / "cmp.json").read_text())
    none = next(r for r in data["results"] if r["variant"] == "none")
    assert none["compile"]["spec_applied"] is False

    # the same run with a generous threshold is not a regression: exit 0
    p = subprocess.run([sys.executable, "-m", "boo_tui", *args, "--fail-on-regression", "5000"], env=env,
                       cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr


def test_malformed_spec_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.mlir"
    bad.write_text("module attributes { transform.with_named_sequence } { this is not mlir }\n")
    p = subprocess.run([sys.executable, "-m", "boo_tui", GEMM, "--variant", f"bad={bad}", "--export", "x.csv",
                        "--db", str(tmp_path / "r.db")], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and str(bad) in lines[0] and "Traceback" not in p.stderr, p.stderr
    assert not (tmp_path / "x.csv").exists()


def test_dump_dispatches_then_measure_the_folder_as_a_variant(tmp_path):
    env = dict(os.environ, BOO_CACHE_DIR=str(tmp_path / "cache"))
    cmd = "gemm -k 32 -m 64 -n 32"
    p = subprocess.run([sys.executable, "-m", "boo_tui", cmd, "--dump-dispatches", "dumps", "--db",
                        str(tmp_path / "r.db")], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    (folder,) = [d for d in (tmp_path / "dumps").iterdir() if d.is_dir()]
    sources = [f for f in folder.glob("*.mlir") if not f.name.startswith("configured_")]
    assert sources, list(folder.iterdir())
    base_args = [cmd, "--variant", f"edited={folder}/", "--backend", "iree", "--no-best", "--iter", "10",
                 "--export", "out.csv",
                 "--db", str(tmp_path / "r.db")]
    # an unedited folder would measure the baseline's kernel again: refused up front
    p = subprocess.run([sys.executable, "-m", "boo_tui", *base_args], env=env, cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 2 and "edit one first" in p.stderr, p.stderr
    # edit the dispatch as a user would: the accumulator now starts at 1 instead of 0
    (src,) = [f for f in sources if "arith.constant 0.000000e+00 : f32" in f.read_text()]
    src.write_text(src.read_text().replace("arith.constant 0.000000e+00 : f32", "arith.constant 1.000000e+00 : f32"))
    p = subprocess.run([sys.executable, "-m", "boo_tui", *base_args], env=env, cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)
    rows = {r["variant"]: r for r in csv.DictReader(open(tmp_path / "out.csv"))}
    assert set(rows) == {"baseline", "edited"}
    assert rows["baseline"]["numerics"] == "pass"
    # the edited kernel really ran: its outputs no longer match the baseline's
    assert rows["edited"]["status"] == "done" and rows["edited"]["numerics"] == "fail", rows["edited"]
    assert p.returncode == 1, "a kernel with wrong results is a failed job for the exit code"
