"""History across runs and machines, end to end: `--flags`, `boo-tui compare`, `boo-tui merge` and the kernel
trend, on real runs of the real CLI stored in real SQLite files (two databases, as two sessions or machines
would leave them), plus the bad inputs each must refuse in one line."""
from __future__ import annotations

import json
import math
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from boo_engine.history import kernel_trend, run_kernels

GEMM = "gemm -m 256 -n 256 -k 256"
#: code for a generic x86-64-v2 CPU (SSE4.2: 16-byte vectors, no FMA) instead of this one: the 512^3 float32 gemm
#: runs 2.2-2.5x slower on a Zen 3 (AVX2) and 4.3x (nehalem, the same ISA) on an AVX-512 Xeon. (16-byte vectors on
#: the host's ISA, the flag used before, does not compile on AVX-512 hosts: IREE refuses the 8192-byte vector ops
#: it makes.) A regression big enough to be called across two runs, whose confidence comes from
#: each run's rounds and counts each run's own spread once more (compare.py); the 256^3 gemm (~0.7 ms) is big
#: enough that its rounds do not scatter like a 10 us kernel's. The features are named with the CPU: the baseline
#: (BOO's build) asks for `--iree-llvmcpu-target-cpu-features=host`, and x86-64-v2 with the host's AVX-512
#: features made iree-compile crash (SIGSEGV); with none named, our build refuses the CPU alone.
SLOW_FLAGS = ("--iree-llvmcpu-target-cpu=x86-64-v2", "--iree-llvmcpu-target-cpu-features=+sse4.2")
SLOW = " ".join(SLOW_FLAGS)
RUN = [GEMM, "--iter", "30", "--backend", "iree", "--no-best", "--no-numerics", "--headless"]   # the baseline alone


def boo_tui(args, env, cwd, timeout=300):
    return subprocess.run([sys.executable, "-m", "boo_tui", *map(str, args)], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def one_line_error(p):
    """Usage errors: exit 2, one line on stderr, never a traceback."""
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "error:" in lines[0] and "Traceback" not in p.stderr, p.stderr
    return lines[0]


@pytest.fixture(scope="module")
def dbs(cli_env, tmp_path_factory):
    """Session 1 (one.db): two runs of the gemm with the default flags. Session 2 (two.db): one run with --flags
    that slow it down. Returns (dir, env)."""
    d = tmp_path_factory.mktemp("history")
    for db, extra in (("one.db", []), ("one.db", []), ("two.db", ["--flags", SLOW])):
        p = boo_tui([*RUN, "--db", db, *extra], cli_env, d)
        assert p.returncode == 0, p.stderr
    return d, cli_env


def count(db, table):
    with sqlite3.connect(db) as c:
        return c.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def test_flags_reach_every_job_the_cache_key_and_the_run(dbs):
    d, _ = dbs
    with sqlite3.connect(d / "two.db") as c:
        config = json.loads(c.execute("SELECT config FROM runs").fetchone()[0])
        commands = [json.loads(r[0]) for r in c.execute("SELECT compile_command FROM kernels")]
        keys_two = {r[0] for r in c.execute("SELECT cache_key FROM kernels")}
    with sqlite3.connect(d / "one.db") as c:
        keys_one = {r[0] for r in c.execute("SELECT cache_key FROM kernels")}
        plain = [json.loads(r[0]) for r in c.execute("SELECT compile_command FROM kernels")]
    assert config["compile_flags"] == list(SLOW_FLAGS)
    assert commands and all(f in cmd for cmd in commands for f in SLOW_FLAGS)   # every kernel compiled with them
    assert not any(f in cmd for cmd in plain for f in SLOW_FLAGS)
    assert keys_one.isdisjoint(keys_two)                         # never the cached kernel built without them


def test_compare_a_run_with_itself_is_all_same(dbs, tmp_path):
    d, env = dbs
    out = tmp_path / "self.json"
    p = boo_tui(["compare", d / "one.db:1", d / "one.db:1", "--export", out, "--fail-on-regression", "0"], env, d)
    assert p.returncode == 0, p.stderr
    data = json.loads(out.read_text())
    assert data["comparisons"] and {c["verdict"] for c in data["comparisons"]} == {"same"}
    assert data["differences"] == []
    assert data["geomean"]["baseline"]["geomean_ratio"] == pytest.approx(1.0)


def test_compare_finds_the_flags_regression(dbs, tmp_path):
    d, env = dbs
    md, csv_out, js = tmp_path / "cmp.md", tmp_path / "cmp.csv", tmp_path / "cmp.json"
    # B as a bare file: its last run; A as file:run
    p = boo_tui(["compare", f"{d / 'one.db'}:1", d / "two.db", "--fail-on-regression", "20",
                 "--export", md, "--export", csv_out, "--export", js], env, d)
    assert p.returncode == 3, p.stderr
    assert "regression:" in p.stderr and GEMM in p.stderr
    data = json.loads(js.read_text())
    (c,) = data["comparisons"]
    assert (c["command"], c["column"], c["target"]) == (GEMM, "baseline", "cpu")
    assert c["verdict"] == "slower" and c["ratio"] > 1.2 and c["ci_low"] > 1.0
    assert {"what": "flags", "a": "-", "b": SLOW} in data["differences"]
    text = md.read_text()
    assert "What differs" in text and SLOW in text and "slower" in text
    assert "slower" in csv_out.read_text().splitlines()[1]
    # without --fail-on-regression a regression is reported, not an exit code; Markdown on stdout
    p = boo_tui(["compare", f"{d / 'one.db'}:1", d / "two.db"], env, d)
    assert p.returncode == 0 and "| `gemm -m 256 -n 256 -k 256` | baseline |" in p.stdout


def test_compare_never_imports_the_compiler(dbs):
    d, env = dbs
    code = ("import sys; from boo_tui.cli import main; rc = main(['compare', 'one.db:1', 'two.db']); "
            "assert 'iree.compiler' not in sys.modules, 'imported iree.compiler'; sys.exit(rc)")
    p = subprocess.run([sys.executable, "-c", code], env=env, cwd=d, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr


@pytest.fixture(scope="module")
def merged(dbs):
    d, env = dbs
    out = d / "all.db"
    p = boo_tui(["merge", "one.db", "two.db", "-o", out], env, d)
    assert p.returncode == 0, p.stderr
    return out


def test_merge_keeps_everything_once_and_is_idempotent(dbs, merged):
    d, env = dbs
    tables = ("runs", "results", "samples", "kernels", "peaks")
    before = {t: count(d / "one.db", t) + count(d / "two.db", t) for t in tables}
    assert {t: count(merged, t) for t in tables if t != "peaks"} == {t: before[t] for t in tables if t != "peaks"}
    with sqlite3.connect(merged) as c:
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert c.execute("PRAGMA foreign_key_check").fetchall() == []
        hosts = c.execute("SELECT COUNT(DISTINCT environment_id) FROM runs").fetchone()[0]
        per_run = c.execute("SELECT r.run_id, COUNT(*) FROM samples s JOIN results r ON r.id = s.result_id "
                            "GROUP BY r.run_id ORDER BY r.run_id").fetchall()
    assert hosts >= 1 and [n for _, n in per_run] == [30, 30, 30]
    snapshot = {t: count(merged, t) for t in tables + ("environments", "commands", "variants")}
    # the same inputs again (and the output itself) into it: nothing added
    p = boo_tui(["merge", "one.db", "two.db", "all.db", "-o", merged, "--force"], env, d)
    assert p.returncode == 0, p.stderr
    assert "0 run(s) added" in p.stderr
    assert {t: count(merged, t) for t in snapshot} == snapshot
    # the merged runs compare as the originals do
    p = boo_tui(["compare", f"{merged}:1", f"{merged}:3", "--fail-on-regression", "20"], env, d)
    assert p.returncode == 3, p.stderr


def test_trend_of_a_kernel_over_three_runs(merged):
    keys = run_kernels(merged, 1)
    assert (GEMM, "baseline", "iree", "cpu") in keys
    points = kernel_trend(merged, GEMM, "baseline", "iree", "cpu")
    assert [p.run_id for p in points] == [1, 2, 3]
    assert [p.started_at for p in points] == sorted(p.started_at for p in points)
    for p in points:
        assert p.n == 30 and p.ci_low_us <= p.median_us <= p.ci_high_us and p.host and p.device
        assert p.compiler and "IREE" in p.compiler
    assert [p.flags for p in points] == [(), (), SLOW_FLAGS]
    assert [p.flags_changed for p in points] == [False, False, True]
    assert not any(p.compiler_changed for p in points)
    assert points[2].median_us > 1.2 * max(points[0].median_us, points[1].median_us)
    assert kernel_trend(merged, GEMM, "no-such-variant", "iree", "cpu") == []
    assert all(math.isfinite(p.ci_high_us) for p in points)


# ---- bad input ------------------------------------------------------------------------------------------------

def _newer_copy(src: Path, dst: Path) -> Path:
    shutil.copy(src, dst)
    with sqlite3.connect(dst) as c:
        c.execute("INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
                  "VALUES ('boo_results', 'm999_future', '2030-01-01')")
    return dst


def test_bad_inputs_are_one_line_usage_errors(dbs, tmp_path):
    d, env = dbs
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as c:
        c.execute("CREATE TABLE t (x)")
    newer = _newer_copy(d / "one.db", tmp_path / "newer.db")
    one = str(d / "one.db")
    cases = {
        "junk": (["compare", junk, one], "not a readable SQLite database"),
        "foreign": (["compare", f"{foreign}:1", one], "not a boo-tui results database"),
        "newer": (["compare", newer, one], "newer boo-tui"),
        "missing file": (["compare", tmp_path / "nope.db", one], "no results database"),
        "no such run": (["compare", f"{one}:99", one], "no run 99"),
        "bare id, no db": (["compare", "1", "2", "--db", tmp_path / "absent.db"], "no results database"),
        "bad export": (["compare", one, one, "--export", tmp_path / "x.txt"], "unknown format"),
        "merge junk": (["merge", one, junk, "-o", tmp_path / "m.db"], "not a readable SQLite database"),
        "merge newer": (["merge", newer, "-o", tmp_path / "m.db"], "newer boo-tui"),
        "merge exists": (["merge", one, "-o", d / "two.db"], "exists: --force"),
    }
    for name, (args, words) in cases.items():
        line = one_line_error(boo_tui(args, env, tmp_path))
        assert words in line, (name, line)
    assert not (tmp_path / "m.db").exists()
    assert not list(tmp_path.glob(".m.db*")), "no temporary left behind"
    assert not list(tmp_path.glob("*.txt"))
    assert not (tmp_path / "absent.db").exists(), "compare never creates a database"


def test_runs_with_nothing_in_common(dbs, tmp_path):
    """A run of another command (a real run, synthesized through the Store API): nothing to compare, exit 2."""
    from boo_engine.bench.stats import compute_stats
    from boo_engine.results import JobResult
    from boo_engine.store import Store

    d, env = dbs
    other = tmp_path / "other.db"
    with Store(other) as store:
        run = store.start_run(command_line="boo-tui x", target="cpu", config={}, environment={"host": "elsewhere"})
        samples = [10.0 + i * 0.01 for i in range(30)]
        store.record_result(run, JobResult(job_id="j", command="gemm -m 8 -n 8 -k 8", func_name="gemm_8",
                                           op="gemm", variant="baseline", target="cpu", backend="iree",
                                           status="done", samples_us=samples, stats=compute_stats(samples)))
        store.finish_run(run, "done")
    line = one_line_error(boo_tui(["compare", d / "one.db", other], env, tmp_path))
    assert "no finished result in common" in line


def test_flags_bad_values_are_usage_errors(cli_env, tmp_path):
    line = one_line_error(boo_tui([*RUN, "--db", tmp_path / "f.db", "--flags", "--iree-no-such-option"], cli_env,
                                  tmp_path))
    assert "--flags" in line and "--iree-no-such-option" in line
    line = one_line_error(boo_tui([*RUN, "--db", tmp_path / "f.db", "--flags", "'unclosed"], cli_env, tmp_path))
    assert "--flags" in line


def test_compare_split_over_processes_gives_the_same_comparisons(tmp_path, monkeypatch):
    """The CLI compares big runs in forked workers: the same comparisons, in the same order, as one process."""
    import numpy as np

    from boo_engine.bench.stats import compute_stats
    from boo_engine.history import RunRef, compare_stored, load_run
    from boo_engine.history import runs as runs_mod
    from boo_engine.results import JobResult
    from boo_engine.store import Store

    db = tmp_path / "many.db"
    rng = np.random.default_rng(0)
    with Store(db) as store:
        for slow in (1.0, 1.2):
            run = store.start_run(command_line="x", target="cpu", config={}, environment={"slow": slow})
            for i in range(12):
                s = (10.0 * (slow if i % 3 == 0 else 1.0) * (1 + 0.01 * rng.standard_normal(30))).tolist()
                store.record_result(run, JobResult(job_id=f"j{i}", command=f"gemm -m {i + 1} -n 8 -k 8",
                                                   func_name=f"g{i}", op="gemm", variant="baseline", target="cpu",
                                                   backend="iree", status="done", samples_us=s,
                                                   stats=compute_stats(s)))
            store.finish_run(run, "done")
    a, b = load_run(RunRef(db, 1)), load_run(RunRef(db, 2))
    serial = compare_stored(a, b, workers=1).comparisons
    monkeypatch.setattr(runs_mod, "PARALLEL_MIN", 0)
    parallel = compare_stored(a, b, workers=2).comparisons
    assert list(parallel.items()) == list(serial.items()) and len(serial) == 12
    assert sum(c.verdict == "slower" for c in serial.values()) == 4


def test_newest_first_is_by_start_time_also_after_a_merge(dbs):
    """Merged in the other order, the newest run got the lowest id, and "newest first" listed it last."""
    from boo_engine.store import Store

    d, env = dbs
    p = boo_tui(["merge", "two.db", "one.db", "-o", "reversed.db"], env, d)
    assert p.returncode == 0, p.stderr
    store = Store(d / "reversed.db")
    try:
        runs = store.list_runs()
        last = store.last_run_id()
    finally:
        store.close()
    starts = [r["started_at"] for r in runs]
    assert starts == sorted(starts, reverse=True) and [r["id"] for r in runs] == [1, 3, 2], runs
    assert last == 1     # two.db's run, the newest, merged first


def test_two_files_of_one_name_are_labelled_apart_in_a_comparison(dbs):
    d, env = dbs
    for where in ("laptop", "ci"):
        (d / where).mkdir(exist_ok=True)
        shutil.copy(d / "one.db", d / where / "r.db")
    p = boo_tui(["compare", "laptop/r.db:1", "ci/r.db:2"], env, d)
    assert p.returncode == 0, p.stderr
    assert "laptop/r.db:1" in p.stdout and "ci/r.db:2" in p.stdout, p.stdout[:2000]


def test_the_trend_plot_names_its_runs_on_the_x_axis():
    from boo_engine.history import TrendPoint
    from boo_tui.screens.trend import render_trend

    points = [TrendPoint(run_id=i, started_at=f"2026-11-{10 + i:02d}T05:00:00+00:00", host="h", device="d",
                         compiler="c", flags=(), median_us=100.0 + i, ci_low_us=95.0 + i, ci_high_us=105.0 + i, n=20,
                         noisy=False, compiler_changed=False, flags_changed=False) for i in (4, 7, 9)]
    text = render_trend(points, 100, 16)
    assert "#4 11-14" in text and "#7 11-17" in text and "#9 11-19" in text


def test_a_run_started_with_python_dash_m_is_stored_as_boo_tui(dbs):
    """`python -m boo_tui ...` stored `__main__.py ...` as the run's command line (the history screen shows it)."""
    d, _ = dbs
    with sqlite3.connect(d / "one.db") as c:
        lines = [line for (line,) in c.execute("SELECT command_line FROM runs")]
    assert lines and all(line.startswith("boo-tui ") for line in lines), lines
