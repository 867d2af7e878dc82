"""Weights from captured commands files (`# boo-tui: calls=N share=P%`): reading them, the model line
(`weights.model_lines`) and every export of a real run (CSV, JSON, Markdown, boo-driver's CSV) checked against a
hand computation from the medians stored in the database; `--resume` keeps them."""
from __future__ import annotations

import csv
import json
import math
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from boo_engine.bench.stats import compute_stats
from boo_engine.commands import CommandError, read_commands_file
from boo_engine.comparisons import compare_results
from boo_engine.exporters import MODEL_COMMAND, MODEL_STATUS
from boo_engine.markdown import describe_model_line, format_us
from boo_engine.results import DONE, FAILED, JobResult
from boo_engine.weights import model_lines

GEMM = "gemm -k 16 -m 32 -n 16"
CONV = "conv -n 1 -c 4 -H 8 -W 8 -k 4 -y 3 -x 3 -p 1 -q 1"


# ---- reading ---------------------------------------------------------------------------------------------
def test_a_weight_line_gives_the_next_command_its_weight(tmp_path):
    f = tmp_path / "model.txt"
    f.write_text("# captured from a model\n"
                 "# boo-tui: calls=12 share=8.31% self=3.10%\n"
                 "\n"
                 "# an ordinary comment between them\n"
                 f"{GEMM}\n"
                 f"{CONV}\n"                               # no weight line: none (the last one was used up)
                 "# boo-tui: share=0.5 us=12.5 calls=1\n"  # any order, `%` optional, `us` optional
                 f"{GEMM} --iter 5\n")
    commands = read_commands_file(f)
    assert [(c.calls, c.share) for c in commands] == [(12, 8.31), (None, None), (1, 0.5)]
    assert [c.captured_us for c in commands] == [None, None, 12.5]
    assert commands[2].iters == 5 and commands[2].text == GEMM      # the command line itself parses as before
    lines = read_commands_file(f, errors="collect")
    assert [(ln.source.rsplit(":", 1)[1], ln.calls, ln.share, ln.captured_us) for ln in lines] == [
        ("5", 12, 8.31, None), ("6", None, None, None), ("8", 1, 0.5, 12.5)]


@pytest.mark.parametrize("weight, says", [
    ("calls=0 share=1%", "calls=0 is not an integer >= 1"),
    ("calls=x share=1%", "calls=x is not an integer >= 1"),
    ("calls=2.5 share=1%", "calls=2.5 is not an integer >= 1"),
    ("calls=3 share=abc", "share=abc is not a percentage between 0 and 100"),
    ("calls=3 share=120%", "share=120% is not a percentage between 0 and 100"),
    ("calls=3", "no share"),
    ("share=3%", "no calls"),
    ("calls=3 share=1% junk", "'junk' is not key=value"),
    ("calls=3 share=1% us=abc", "us=abc is not a time in microseconds >= 0"),
    ("calls=3 share=1% us=-2.5", "us=-2.5 is not a time in microseconds >= 0"),
    ("calls=3 share=1% us=nan", "us=nan is not a time in microseconds >= 0"),
])
def test_a_malformed_weight_line_is_a_one_line_error_naming_file_and_line(tmp_path, weight, says):
    f = tmp_path / "model.txt"
    f.write_text(f"# boo-tui: calls=1 share=1%\n{GEMM}\n# boo-tui: {weight}\n{CONV}\n")
    with pytest.raises(CommandError) as e:
        read_commands_file(f)
    assert str(e.value) == f"{f}:3: weight line: {says}" or (str(e.value).startswith(f"{f}:3: weight line: ")
                                                               and says in str(e.value)), str(e.value)
    assert "\n" not in str(e.value)
    # collect mode: a failed row like any bad line; the command after it runs, without the bad weight
    lines = read_commands_file(f, errors="collect")
    assert [ln.ok for ln in lines] == [True, False, True]
    assert lines[1].message.startswith(f"{f}:3: weight line: ") and says in lines[1].message
    assert (lines[2].calls, lines[2].command.calls) == (None, None)


def test_a_bad_command_keeps_its_weight_so_the_model_line_can_count_it_missing(tmp_path):
    f = tmp_path / "model.txt"
    f.write_text("# boo-tui: calls=4 share=20%\nconv -n 1 -c oops\n")
    (line,) = read_commands_file(f, errors="collect")
    assert not line.ok and (line.calls, line.share) == (4, 20.0)


# ---- the model line on its own ---------------------------------------------------------------------------
def _result(command: str, variant: str, samples: list[float], calls: int | None, share: float | None,
            status: str = DONE, captured_us: float | None = None) -> JobResult:
    ok = status == DONE
    return JobResult(job_id=f"{command}/{variant}", command=command, func_name="k", op="conv", variant=variant,
                     target="cpu", backend="iree", status=status, calls=calls, share=share, captured_us=captured_us,
                     samples_us=samples if ok else [], stats=compute_stats(samples) if ok else None)


def _noisy(median: float, n: int, rng: random.Random) -> list[float]:
    return [median * rng.uniform(0.97, 1.03) for _ in range(n)]


def test_model_line_is_the_weighted_sum_with_a_ci_and_partial_when_a_kernel_failed():
    rng = random.Random(1)
    results = [
        _result("a", "baseline", _noisy(100, 40, rng), 10, 50.0), _result("a", "v", _noisy(70, 40, rng), 10, 50.0),
        _result("b", "baseline", _noisy(300, 40, rng), 1, 20.0), _result("b", "v", _noisy(330, 40, rng), 1, 20.0),
        _result("c", "baseline", _noisy(50, 40, rng), 3, 5.0), _result("c", "v", [], 3, 5.0, status=FAILED),
        _result("d", "baseline", _noisy(50, 40, rng), None, None), _result("d", "v", _noisy(50, 40, rng), None, None),
    ]
    comparisons = compare_results(results)
    base, v = model_lines(results, comparisons)
    med = {(r.command, r.variant): r.stats.median_us for r in results if r.stats}
    assert base.label == "baseline" and base.commands == 3 and not base.partial and base.unweighted == 1
    assert math.isclose(base.total_us, 10 * med["a", "baseline"] + med["b", "baseline"] + 3 * med["c", "baseline"])
    # the variant failed on c: its line counts a and b only, against the baseline's sum over a and b, and says so
    assert v.partial and (v.commands, v.weighted, v.calls, v.share) == (2, 3, 11, 70.0)
    assert math.isclose(v.baseline_us, 10 * med["a", "baseline"] + med["b", "baseline"])
    assert math.isclose(v.ratio, (10 * med["a", "v"] + med["b", "v"]) / v.baseline_us)
    assert v.ci_low < v.ratio < v.ci_high and v.ci_high < 1.0 and v.verdict == "faster"
    assert "partial: 2 of 3 weighted commands" in describe_model_line(v) and "1 without weight" in describe_model_line(v)


def test_model_line_ci_holds_its_ratio_when_the_median_of_rounds_is_not_the_median_of_samples():
    """The line's ratio is of the medians of all samples, its CI resamples the rounds' medians: with one long round
    unlike the short ones the two differ, and the CI must still hold the ratio it is printed beside."""
    def result(variant: str, samples: list[float], rounds: list[int]) -> JobResult:
        return JobResult(job_id=f"a/{variant}", command="a", func_name="k", op="conv", variant=variant, target="cpu",
                         backend="iree", status=DONE, calls=2, share=50.0, samples_us=samples,
                         stats=compute_stats(samples), rounds=rounds)

    rng = random.Random(7)
    rounds = [3] * 6 + [40]
    base = result("baseline", _noisy(100, 18, rng) + _noisy(200, 40, rng), rounds)   # median 200, rounds' 100
    v = result("v", _noisy(100, 58, rng), rounds)
    (_, line) = model_lines([base, v], compare_results([base, v]))
    assert math.isclose(line.ratio, v.stats.median_us / base.stats.median_us) and line.ratio < 0.6
    assert line.ci_low <= line.ratio <= line.ci_high, (line.ci_low, line.ratio, line.ci_high)


def test_model_line_says_what_part_of_the_capture_it_counts_and_its_time_against_the_captured():
    rng = random.Random(4)
    # a file cut to its top three commands: shares 50 + 20 + 5 = 75% of a 1,000 us compute total
    weights = {"a": (10, 50.0, 500.0), "b": (1, 20.0, 200.0), "c": (3, 5.0, 50.0)}
    medians = {("a", "baseline"): 40, ("a", "v"): 30, ("b", "baseline"): 150, ("b", "v"): 160, ("c", "baseline"): 20}
    results = [_result(cmd, variant, _noisy(med, 30, rng), *weights[cmd][:2], captured_us=weights[cmd][2])
               for (cmd, variant), med in medians.items()]
    results.append(_result("c", "v", [], *weights["c"][:2], status=FAILED, captured_us=50.0))
    base, v = model_lines(results, compare_results(results))
    assert math.isclose(base.captured_total_us, 1000.0) and math.isclose(v.captured_total_us, 1000.0)
    assert (base.share, base.captured_us) == (75.0, 750.0)
    assert (v.share, v.captured_us) == (70.0, 700.0), "the variant counts a and b: their part of the capture"
    assert math.isclose(v.vs_captured, v.total_us / 700.0)
    assert "70.0% of the captured compute: 700.0 of 1,000 us, this column " \
        f"{v.total_us / 700.0:.2f}x it" in describe_model_line(v)
    assert v.to_dict()["vs_captured"] == v.vs_captured and v.to_dict()["captured_total_us"] == 1000.0
    # a file written before `us=` (or one command without it): shares only, no captured figures made up
    results[0] = _result("a", "baseline", _noisy(40, 30, rng), 10, 50.0)
    base, v = model_lines(results, compare_results(results))
    assert base.captured_us is None and base.captured_total_us is None and v.captured_us is None
    assert "share 75.0% (the file gives no captured times)" in describe_model_line(base)


def test_model_line_claims_no_verdict_its_samples_cannot_support():
    rng = random.Random(2)
    few = [_result("a", "baseline", _noisy(100, 3, rng), 2, 10.0), _result("a", "v", _noisy(50, 3, rng), 2, 10.0)]
    (_, v) = model_lines(few, compare_results(few))
    assert v.verdict == "insufficient" and math.isnan(v.ci_low)
    # a kernel that is 2x faster but called once beside an unchanged one called 100 times: the model barely moves
    same = [_result("a", "baseline", _noisy(100, 50, rng), 100, 90.0), _result("a", "v", _noisy(100, 50, rng), 100, 90.0),
            _result("b", "baseline", _noisy(10, 50, rng), 1, 1.0), _result("b", "v", _noisy(5, 50, rng), 1, 1.0)]
    (_, v) = model_lines(same, compare_results(same))
    assert abs(v.ratio - 1) < 0.03 and v.verdict == "same"


def test_no_weights_no_model_line():
    rng = random.Random(3)
    plain = [_result("a", "baseline", _noisy(100, 20, rng), None, None), _result("a", "v", _noisy(90, 20, rng), None, None)]
    assert model_lines(plain, compare_results(plain)) == []


# ---- a real run, every export -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def env(cli_env):
    return cli_env


def _run(module: str, args: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def _weighted_file(tmp_path: Path) -> Path:
    f = tmp_path / "model.txt"
    f.write_text(f"# boo-tui: calls=3 share=40.5% self=12% us=81\n{GEMM}\n"       # a 200 us compute total
                 f"# boo-tui: calls=5 share=25% us=50\n{CONV}\n"
                 "# boo-tui: calls=2 share=10% us=20\nconv -n 1 -c oops\n")     # a weighted line that fails
    return f


def _stored(db: Path) -> dict[tuple[str, str], tuple[float, int, float, float]]:
    """(command, backend) -> (median_us, calls, share, captured_us), as the database has them."""
    con = sqlite3.connect(db)
    rows = con.execute("SELECT c.text, r.backend, r.median_us, r.calls, r.share, r.captured_us FROM results r "
                       "JOIN commands c ON c.id = r.command_id WHERE r.status = 'done'").fetchall()
    return {(text, backend): tuple(rest) for text, backend, *rest in rows}


def test_every_export_carries_the_weights_and_the_model_line(env, tmp_path):
    f = _weighted_file(tmp_path)
    db = tmp_path / "r.db"
    p = _run("boo_tui", [str(f), "--iter", "20", "--no-best", "--db", str(db), "--export", "r.csv", "--export", "r.json",
                         "--export", "r.md"], env, tmp_path)
    assert p.returncode == 1, p.stderr           # the bad line failed; the rest ran
    stored = _stored(db)
    assert stored[(GEMM, "iree")][1:] == (3, 40.5, 81.0) and stored[(CONV, "torch")][1:] == (5, 25.0, 50.0)
    # by hand, from the stored medians: the model's time in these kernels, per column
    base = 3 * stored[(GEMM, "iree")][0] + 5 * stored[(CONV, "iree")][0]
    torch = 3 * stored[(GEMM, "torch")][0] + 5 * stored[(CONV, "torch")][0]

    rows = list(csv.DictReader(open(tmp_path / "r.csv")))
    kernel_rows = [r for r in rows if r["status"] != MODEL_STATUS]
    assert [(r["calls"], r["share"], r["captured_us"]) for r in kernel_rows] == \
        [("3", "40.5", "81.0")] * 2 + [("5", "25.0", "50.0")] * 2 + [("2", "10.0", "20.0")]
    for r in kernel_rows[:4]:
        assert math.isclose(float(r["weighted_us"]), int(r["calls"]) * float(r["median_us"]))
    model = {r["variant"]: r for r in rows if r["status"] == MODEL_STATUS}
    assert set(model) == {"baseline", "torch"} and all(r["command"] == MODEL_COMMAND for r in model.values())
    assert math.isclose(float(model["baseline"]["median_us"]), base, rel_tol=1e-9)
    assert math.isclose(float(model["torch"]["median_us"]), torch, rel_tol=1e-9)
    assert math.isclose(float(model["torch"]["ratio_vs_baseline"]), torch / base, rel_tol=1e-9)
    assert float(model["torch"]["ci_low"]) <= float(model["torch"]["ratio_vs_baseline"]) <= float(model["torch"]["ci_high"])
    assert model["torch"]["verdict"] in ("faster", "slower", "same", "unclear")
    assert model["torch"]["error"] == "partial: 2 of 3 weighted commands" and model["torch"]["calls"] == "8"
    assert model["torch"]["captured_us"] == "131.0", "the counted commands' time in the capture: 81 + 50"

    data = json.loads((tmp_path / "r.json").read_text())
    assert [(r["calls"], r["share"]) for r in data["results"]][:2] == [(3, 40.5), (3, 40.5)]
    lines = {m["label"]: m for m in data["model"]}
    assert math.isclose(lines["baseline"]["total_us"], base, rel_tol=1e-9)
    assert math.isclose(lines["torch"]["total_us"], torch, rel_tol=1e-9)
    assert math.isclose(lines["torch"]["ratio"], torch / base, rel_tol=1e-9)
    assert lines["torch"]["partial"] and (lines["torch"]["commands"], lines["torch"]["weighted"]) == (2, 3)
    assert math.isclose(lines["torch"]["share"], 65.5)
    assert (lines["torch"]["captured_us"], lines["torch"]["captured_total_us"]) == (131.0, 200.0)
    assert math.isclose(lines["torch"]["vs_captured"], torch / 131.0)

    md = (tmp_path / "r.md").read_text()
    assert "| calls | share |" in next(line for line in md.splitlines() if line.startswith("| command"))
    assert next(line for line in md.splitlines() if line.startswith(f"| `{GEMM}` |")).count("| 3 | 40.50% |") == 1
    model_line = next(line for line in md.splitlines() if line.startswith("Model time in these kernels"))
    assert f"**baseline** {format_us(base)} us" in model_line
    assert f"**torch** {format_us(torch)} us {torch / base:.3f}x" in model_line
    assert "**partial**: 2 of 3 weighted commands" in model_line
    assert f"65.5% of the captured compute: 131.0 of 200.0 us, this column {torch / 131:.2f}x it" in model_line
    geomean_at = md.index("Geomean latency ratio")
    assert geomean_at < md.index("Model time in these kernels")   # beside the geomean

    # --resume (no inputs: the run's own commands read back from the store) keeps the weights
    run_id = sqlite3.connect(db).execute("SELECT MAX(id) FROM runs").fetchone()[0]
    p = _run("boo_tui", ["--resume", str(run_id), "--db", str(db), "--export", "again.csv"], env, tmp_path)
    assert p.returncode in (0, 1), p.stderr
    again = list(csv.DictReader(open(tmp_path / "again.csv")))
    assert [(r["calls"], r["share"], r["captured_us"]) for r in again if r["status"] != MODEL_STATUS] == \
        [(r["calls"], r["share"], r["captured_us"]) for r in kernel_rows]
    again_model = {r["variant"]: r for r in again if r["status"] == MODEL_STATUS}
    assert math.isclose(float(again_model["baseline"]["median_us"]), base, rel_tol=1e-9)


def test_boo_driver_csv_carries_the_weights_and_a_model_row(env, tmp_path):
    f = _weighted_file(tmp_path)
    db = tmp_path / "d.db"
    p = _run("boo_engine.cli.driver", ["--commands-file", str(f), "--csv", "d.csv", "--backend", "iree_boo",
                                       "--backend", "torch", "--iter", "20", "--db", str(db)], env, tmp_path)
    assert p.returncode == 1, p.stderr
    stored = _stored(db)
    rows = list(csv.reader(open(tmp_path / "d.csv")))
    header, body = rows[0], rows[1:]
    assert header[:6] == ["arguments", "iree_boo min", "iree_boo max", "iree_boo mean", "iree_boo stddev",
                          "iree_boo num_dispatches"]        # iree-boo-driver's own columns keep their places
    at = header.index("calls")   # ours after iree-boo-driver's own: the weights first
    assert header[at:at + 4] == ["calls", "share", "iree_boo calls_x_median", "torch calls_x_median"]
    assert header[-5:] == ["iree_boo pct_roofline", "torch pct_roofline", "iree_boo n", "torch n", "iree_boo build"]
    by_args = {r[0]: dict(zip(header, r)) for r in body}
    assert by_args[GEMM]["calls"] == "3" and by_args[CONV]["share"] == "25.0"
    assert math.isclose(float(by_args[GEMM]["iree_boo calls_x_median"]), 3 * stored[(GEMM, "iree")][0])
    model = by_args[next(a for a in by_args if a.startswith(MODEL_COMMAND))]
    assert "partial: iree_boo 2 of 3, torch 2 of 3" in model["arguments"]
    assert math.isclose(float(model["iree_boo calls_x_median"]),
                        3 * stored[(GEMM, "iree")][0] + 5 * stored[(CONV, "iree")][0], rel_tol=1e-9)
    assert math.isclose(float(model["torch calls_x_median"]),
                        3 * stored[(GEMM, "torch")][0] + 5 * stored[(CONV, "torch")][0], rel_tol=1e-9)
    assert model["calls"] == "10"
