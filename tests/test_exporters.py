"""Exports written to real files and read back with the standard parsers."""
from __future__ import annotations

import csv
import json
import os
import re

import numpy as np
import pytest

from boo_engine.bench.stats import compute_stats
from boo_engine.boo_driver_csv import write_boo_driver_csv
from boo_engine.comparisons import compare_results
from boo_engine.errors import BooError
from boo_engine.exporters import CSV_COLUMNS, ExportError, check_export_path, export_results
from boo_engine.results import DONE, FAILED, CompileInfo, JobResult, NumericsInfo

CONV = "conv -n 1 -c 8 -H 16 -W 16 -k 4 -y 3 -x 3"
GEMM = "gemm --a_w 32 --a_h 64 --b_w 128"
ENV = {"host": "benchbox", "cpu": "AMD EPYC", "cores_logical": 2, "target": "cpu",
       "iree_compile_version": "IREE compiler version 3.13.0rc20261016 @ 89ece87", "torch_version": "2.13.0+cpu"}


def _job(cmd: str, variant: str, backend: str, median: float, seed: int, **kw) -> JobResult:
    samples = list(median * (1 + 0.01 * np.random.default_rng(seed).standard_normal(60)))
    r = JobResult(job_id=f"{cmd}|{variant}|{backend}", command=cmd, func_name=cmd.split()[0] + "_fn",
                  op=cmd.split()[0], variant=variant, target="cpu", backend=backend, status=DONE,
                  stats=compute_stats(samples, flops=10**7), samples_us=samples,
                  compile=CompileInfo(seconds=1.0, num_dispatches=1, spec_applied=True if variant != "baseline" else None)
                  if backend == "iree" else None,
                  numerics=NumericsInfo("pass", {"max_abs": 1e-6, "mean_error": 0.0}),
                  reproducer=f"iree-benchmark-module --function={cmd.split()[0]}")
    for k, v in kw.items():
        setattr(r, k, v)
    return r


@pytest.fixture
def results() -> list[JobResult]:
    return [
        _job(CONV, "baseline", "iree", 100.0, 1),
        _job(CONV, "tuned", "iree", 80.0, 2),
        _job(CONV, "baseline", "torch", 130.0, 3),
        _job(GEMM, "baseline", "iree", 50.0, 4, noisy=True, noise_reason="IQR/median 14% > 10%"),
        JobResult(job_id="g-tuned", command=GEMM, func_name="gemm_fn", op="gemm", variant="tuned", target="cpu",
                  backend="iree", status=FAILED, error="iree-compile failed: error: 'foo' op | bad"),
        _job(GEMM, "baseline", "torch", 49.5, 5),
    ]


def test_csv_round_trip(tmp_path, results):
    path = tmp_path / "out.csv"
    export_results(path, results, environment=ENV)
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == CSV_COLUMNS
    assert len(rows) == len(results)
    by = {(r["command"], r["variant"], r["backend"]): r for r in rows}
    base = by[(CONV, "baseline", "iree")]
    assert float(base["median_us"]) == results[0].stats.median_us   # full precision
    assert int(base["n"]) == 60 and base["numerics"] == "pass" and base["ratio_vs_baseline"] == ""
    tuned = by[(CONV, "tuned", "iree")]
    assert tuned["verdict"] == "faster" and 0.78 < float(tuned["ratio_vs_baseline"]) < 0.82
    assert float(tuned["ci_low"]) <= float(tuned["ratio_vs_baseline"]) <= float(tuned["ci_high"])
    assert tuned["spec_applied"] == "true"
    assert by[(CONV, "baseline", "torch")]["verdict"] == "slower"
    failed = by[(GEMM, "tuned", "iree")]
    assert failed["status"] == "failed" and "bad" in failed["error"] and failed["median_us"] == ""
    assert by[(GEMM, "baseline", "iree")]["noisy"] == "true"
    assert by[(GEMM, "baseline", "torch")]["verdict"] == "same"


def test_json_has_everything(tmp_path, results):
    path = tmp_path / "out.json"
    run = {"id": 7, "command_line": "boo-tui ...", "started_at": "2026-11-21T05:00:00+00:00"}
    export_results(path, results, environment=ENV, run=run)
    doc = json.loads(path.read_text())
    assert doc["environment"] == ENV and doc["run"] == run
    assert len(doc["results"]) == len(results)
    first = doc["results"][0]
    assert first["samples_us"] == results[0].samples_us
    assert first["stats"]["median_us"] == results[0].stats.median_us
    assert first["compile"]["num_dispatches"] == 1 and first["numerics"]["stats"]["max_abs"] == 1e-6
    assert first["reproducer"].startswith("iree-benchmark-module")
    tuned = doc["results"][1]
    assert tuned["comparison"]["verdict"] == "faster" and tuned["column"] == "tuned"
    assert {(c["command"], c["variant"]) for c in doc["comparisons"]} == {(CONV, "tuned"), (CONV, "torch"),
                                                                            (GEMM, "torch")}
    assert doc["summary"]["tuned"]["faster"] == 1 and doc["summary"]["torch"]["n"] == 2


def test_json_without_nan(tmp_path):
    # too few samples: the comparison has NaN p-value and CI; the file must still be strict JSON
    few = [_job(CONV, "baseline", "iree", 10.0, 1), _job(CONV, "v", "iree", 10.0, 2)]
    for r in few:
        r.samples_us = r.samples_us[:3]
    path = tmp_path / "few.json"
    export_results(path, few)
    text = path.read_text()
    assert "NaN" not in text
    doc = json.loads(text)
    assert doc["comparisons"][0]["verdict"] == "insufficient" and doc["comparisons"][0]["p_value"] is None


def _md_table(text: str) -> list[list[str]]:
    rows = [ln for ln in text.splitlines() if ln.startswith("|")]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", ln)[1:-1]] for ln in rows]


def test_markdown_side_by_side(tmp_path, results):
    path = tmp_path / "out.md"
    export_results(path, results, environment=ENV, run={"started_at": "2026-11-21T06:00:00.123+01:00"})
    text = path.read_text()
    header_line = text.splitlines()[2]
    assert "`cpu`" in header_line and "benchbox" in header_line and "IREE 3.13.0rc20261016" in header_line
    assert "2026-11-21 05:00 UTC" in header_line
    table = _md_table(text)
    head, align, *body = table
    assert head == ["command", "baseline (us)", "tuned (us)", "tuned vs baseline", "torch (us)", "torch vs baseline"]
    assert all(re.fullmatch(r"-+:?", a) for a in align)
    assert len(body) == 2 and all(len(r) == len(head) for r in body)
    conv, gemm = body
    assert conv[0] == f"`{CONV}`" and conv[1] == "100.0"
    assert conv[3].startswith("0.8") and "faster" in conv[3] and "[" in conv[3]
    # torch's column names the faster side, its mark the IREE kernel's: torch 1.3x slower is IREE faster, green
    assert conv[5].endswith("✅ iree faster"), conv[5]
    assert gemm[2].startswith("**failed**") and "\\|" in gemm[2]   # the failure reason, pipe escaped
    assert "⚠" in gemm[1]
    assert "≈ same" in gemm[5]
    summary = [ln for ln in text.splitlines() if ln.startswith("Geomean")]
    assert summary and "**tuned**" in summary[0] and "(1 faster, 0 slower, 0 same)" in summary[0]


def test_markdown_baseline_only(tmp_path, results):
    path = tmp_path / "base.md"
    export_results(path, [r for r in results if r.variant == "baseline" and r.backend == "iree"], environment=ENV)
    head, _, *body = _md_table(path.read_text())
    assert head[:2] == ["command", "median (us)"] and len(body) == 2
    assert body[0][-1] == "60"


def test_comparisons_given_are_used(tmp_path, results):
    comps = compare_results(results, min_effect=0.5)   # nothing clears a 50% bar
    path = tmp_path / "given.csv"
    export_results(path, results, comparisons=comps)
    with open(path, newline="") as f:
        verdicts = {r["verdict"] for r in csv.DictReader(f)}
    assert verdicts == {"same", ""}


@pytest.mark.parametrize("name", ["out.xlsx", "out", "out.csv.bak"])
def test_unknown_extension_fails_before_work(tmp_path, name):
    with pytest.raises(ExportError, match="unknown format") as e:
        export_results(tmp_path / name, [object()])   # never looked at: the check comes first
    assert isinstance(e.value, BooError) and "\n" not in str(e.value)
    assert list(tmp_path.iterdir()) == []


def test_unwritable_paths(tmp_path, results):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    a_dir = tmp_path / "dir.csv"
    a_dir.mkdir()
    for bad, why in ((blocker / "out.csv", "is not a directory"), (tmp_path / "missing" / "out.json", "does not exist"),
                     (a_dir, "is a directory")):
        with pytest.raises(ExportError, match=why) as e:
            export_results(bad, results)
        assert "\n" not in str(e.value) and str(bad) in str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.csv", "file"]
    assert list(a_dir.iterdir()) == []
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    try:
        if os.geteuid() != 0:   # root writes anywhere: the permission case only means something for users
            with pytest.raises(ExportError, match="cannot write"):
                check_export_path(ro / "out.md")
    finally:
        os.chmod(ro, 0o700)


def test_atomic_write_keeps_old_file_on_failure(tmp_path, results, monkeypatch):
    path = tmp_path / "out.csv"
    export_results(path, results)
    before = path.read_text()

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(ExportError, match="No space left"):
        export_results(path, results[:1])
    assert path.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]   # no temp file left


def test_boo_driver_csv(tmp_path, results):
    """BOO's numerics columns come once, after every backend's timing columns, with BOO's names and order (its
    nightly CI reads them); a check without the statistics BOO writes (an old result) gives N.A. cells."""
    conv_base, conv_torch = results[0], results[2]
    gemm_failed = results[4]
    rows = [(CONV, {"iree": conv_base, "torch": conv_torch}), (GEMM, {"iree": gemm_failed})]
    path = tmp_path / "driver.csv"
    write_boo_driver_csv(path, rows)
    with open(path, newline="") as f:
        table = list(csv.reader(f))
    assert table[0] == [
        "arguments",
        "iree min", "iree max", "iree mean", "iree stddev", "iree num_dispatches",
        "torch min", "torch max", "torch mean", "torch stddev", "torch num_dispatches",
        "numerics_pass", "boo_vs_ref_mean", "boo_vs_ref_stddev", "boo_vs_ref_max",
        "pytorch_vs_ref_mean", "pytorch_vs_ref_stddev", "pytorch_vs_ref_max",
        "boo_vs_pytorch_mean", "boo_vs_pytorch_stddev", "boo_vs_pytorch_max", "structured_test",
        "numerics_max_rel_err", "numerics_reason",
        "iree n", "torch n",   # ours, after every column of iree-boo-driver's: the samples taken
    ]
    conv, gemm = table[1], table[2]
    assert conv[-2:] == [str(conv_base.stats.n), str(conv_torch.stats.n)] and gemm[-2:] == ["N.A.", "N.A."]
    conv, gemm = conv[:-2], gemm[:-2]
    assert conv[0] == CONV and float(conv[1]) == conv_base.stats.min_us and conv[5] == "1" and conv[11] == "PASS"
    assert conv[10] == "N.A."   # torch has no dispatch count
    assert conv[12:22] == ["N.A."] * 10   # no per-output statistics in this check
    assert gemm[0] == GEMM and gemm[11] == "FAIL" and set(gemm[1:11] + gemm[12:]) == {"N.A."}   # kernel failed

    conv_base.numerics = NumericsInfo("fail", {"outputs": [{"mean_err": -1e-9, "std_err": 2e-7, "max_abs_err": 1e-6,
                                                           "torch_mean_err": 0.0, "torch_std_err": 1e-7,
                                                           "torch_max_abs_err": 5e-7, "vs_torch_mean": 1e-9,
                                                           "vs_torch_std": 3e-7, "vs_torch_max_abs": 2e-6}],
                                               "structured": {"pass": True}, "max_rel_err": 0.5, "reason": "why"})
    write_boo_driver_csv(path, [(CONV, {"iree": conv_base})], numerics=True)
    with open(path, newline="") as f:
        header, row = list(csv.reader(f))
    cells = dict(zip(header, row))
    assert [cells[k] for k in ("numerics_pass", "boo_vs_ref_mean", "boo_vs_ref_stddev", "boo_vs_ref_max",
                               "pytorch_vs_ref_stddev", "boo_vs_pytorch_max", "structured_test", "numerics_reason")] \
        == ["FAIL", "-1.000000e-09", "2.000000e-07", "1.000000e-06", "1.000000e-07", "2.000000e-06", "PASS", "why"]


def test_boo_driver_csv_without_numerics(tmp_path, results):
    r = results[0]
    r.numerics = None
    path = tmp_path / "d.csv"
    write_boo_driver_csv(path, [(CONV, {"iree": r})])
    with open(path, newline="") as f:
        assert next(csv.reader(f)) == ["arguments", "iree min", "iree max", "iree mean", "iree stddev",
                                       "iree num_dispatches", "iree n"]
    write_boo_driver_csv(path, [(CONV, {"iree": r})], numerics=True)   # --verify-numerics: the columns, N.A.
    with open(path, newline="") as f:
        header, row = list(csv.reader(f))
    assert header[6] == "numerics_pass" and row[6:-1] == ["N.A."] * 13 and header[-1] == "iree n"
    with pytest.raises(ExportError):
        write_boo_driver_csv(tmp_path / "d.json", [])


def test_a_verdict_names_the_faster_side_for_the_torch_reference():
    """A green check had marked torch beating IREE: the torch column's verdict was the variants' "faster"."""
    from boo_engine.markdown import verdict_words

    assert verdict_words("faster") == ("✅", "faster") and verdict_words("slower") == ("❌", "slower")
    assert verdict_words("faster", reference=True) == ("❌", "torch faster")
    assert verdict_words("slower", reference=True) == ("✅", "iree faster")
    assert verdict_words("same", reference=True) == ("≈", "same")
    assert verdict_words("insufficient", reference=True) == ("❔", "too few samples")
