"""The headless front end (`boo-tui ... --export`) and boo-driver, end to end: real compiles, real kernels, a real
SQLite file. Each test runs the installed entry points in a child process, as a user or CI script would."""
from __future__ import annotations

import csv
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GEMM = "gemm -k 16 -m 32 -n 16"
CONV = "conv -n 1 -c 4 -H 8 -W 8 -k 4 -y 3 -x 3 -p 1 -q 1"


@pytest.fixture(scope="module")
def env(cli_env):
    """One kernel cache (the session's), so each kernel compiles once across tests."""
    return cli_env


def boo_tui(args, env, cwd, timeout=300):
    return subprocess.run([sys.executable, "-m", "boo_tui", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def boo_driver(args, env, cwd, timeout=300):
    return subprocess.run([sys.executable, "-m", "boo_engine.cli.driver", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def test_export_all_formats_and_db(env, tmp_path):
    cmds = tmp_path / "cmds.txt"
    cmds.write_text(f"# two tiny kernels\n{GEMM}\n\n{CONV} -F 1\n")
    db = tmp_path / "r.db"
    p = boo_tui([str(cmds), "--iter", "20", "--db", str(db), "--export", "r.csv", "--export", "r.json",
                 "--export", "r.md"], env, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "", "stdout must stay clean in export mode"

    rows = list(csv.DictReader(open(tmp_path / "r.csv")))
    for col in ("command", "func_name", "variant", "target", "status", "n", "min_us", "median_us", "mean_us",
                "max_us", "stddev_us", "p10_us", "p90_us", "gflops", "gbps", "numerics", "error"):
        assert col in rows[0], col
    # two commands x (iree + torch)
    assert len(rows) == 4
    assert {r["status"] for r in rows} == {"done"}
    iree_rows = [r for r in rows if r["backend"] == "iree"]
    assert all(r["numerics"] == "pass" for r in iree_rows)
    assert all(int(r["n"]) == 20 for r in rows)
    assert all(float(r["min_us"]) <= float(r["median_us"]) <= float(r["max_us"]) for r in rows)

    data = json.loads((tmp_path / "r.json").read_text())
    text = json.dumps(data)
    assert "environment" in data and "iree" in text
    results = data["results"]
    assert all(len(r["samples_us"]) == 20 for r in results)
    assert all(r["reproducer"].startswith("iree-benchmark-module") for r in results if r["backend"] == "iree")

    md = (tmp_path / "r.md").read_text()
    assert "| `gemm -k 16 -m 32 -n 16` |" in md and "torch vs baseline" in md

    con = sqlite3.connect(db)
    assert con.execute("pragma integrity_check").fetchone()[0] == "ok"
    assert con.execute("select status from runs").fetchone()[0] == "done"
    n_samples = con.execute("select count(*) from samples").fetchone()[0]
    assert n_samples == 80


def test_bad_line_is_a_failed_row_and_the_rest_runs(env, tmp_path):
    cmds = tmp_path / "mixed.txt"
    cmds.write_text(f"{GEMM}\nconv -n 2 --no-such-flag 3\n")
    p = boo_tui([str(cmds), "--iter", "10", "--backend", "iree", "--db", str(tmp_path / "r.db"),
                 "--export", "out.csv"], env, tmp_path)
    assert p.returncode == 1, p.stderr
    rows = list(csv.DictReader(open(tmp_path / "out.csv")))
    assert [r["status"] for r in rows].count("done") == 1
    bad = [r for r in rows if r["status"] == "failed"]
    assert len(bad) == 1 and f"{cmds}:2" in bad[0]["error"] and "--no-such-flag" in bad[0]["error"]


@pytest.mark.parametrize("args, needle", [
    (["missing.txt", "--export", "x.csv"], "missing.txt"),
    ([GEMM, "--export", "x.xlsx"], ".xlsx"),
    ([GEMM, "--export", "/proc/no/such/dir/x.csv"], "/proc/no/such/dir"),
    ([GEMM, "--export", "x.csv", "--target", "hip:banana"], "banana"),
    (["conv -n 0 -c 3", "--export", "x.csv"], "-n"),
])
def test_usage_errors_are_one_line_exit_2_and_write_nothing(env, tmp_path, args, needle):
    p = boo_tui(args + ["--db", str(tmp_path / "r.db")], env, tmp_path)
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and needle in lines[0], p.stderr
    assert "Traceback" not in p.stderr
    assert not list(tmp_path.glob("x.*"))


def test_kill_mid_run_then_resume(env, tmp_path):
    cmds = tmp_path / "many.txt"
    sizes = [16, 24, 32, 40, 48, 56]
    cmds.write_text("".join(f"gemm -k {s} -m {s} -n {s}\n" for s in sizes))
    db = tmp_path / "r.db"
    args = [str(cmds), "--iter", "30", "--min-time", "0.6", "--backend", "iree", "--no-numerics",
            "--db", str(db), "--export", "out.json"]
    proc = subprocess.Popen([sys.executable, "-m", "boo_tui", *args], env=env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    done_before = 0
    while time.time() < deadline:
        time.sleep(0.3)
        if db.exists():
            try:
                con = sqlite3.connect(db, timeout=1)
                done_before = con.execute("select count(*) from results where status='done'").fetchone()[0]
                con.close()
            except sqlite3.Error:
                continue
            if done_before >= 2:
                break
        assert proc.poll() is None, proc.stderr.read()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert 2 <= done_before < len(sizes)

    con = sqlite3.connect(db)
    assert con.execute("pragma integrity_check").fetchone()[0] == "ok"
    finished = dict(con.execute("select job_id, finished_at from results where status='done'").fetchall())
    for job_id in finished:  # every finished result kept all its samples
        n = con.execute("select n from results where job_id=?", (job_id,)).fetchone()[0]
        rid = con.execute("select id from results where job_id=?", (job_id,)).fetchone()[0]
        assert con.execute("select count(*) from samples where result_id=?", (rid,)).fetchone()[0] == n
    con.close()

    p = boo_tui(args + ["--resume"], env, tmp_path)
    assert p.returncode == 0, p.stderr
    con = sqlite3.connect(db)
    assert con.execute("select count(*) from runs").fetchone()[0] == 1
    rows = dict(con.execute("select job_id, finished_at from results where status='done'").fetchall())
    assert len(rows) == len(sizes)
    for job_id, finished_at in finished.items():
        assert rows[job_id] == finished_at, "a finished job was measured again"
    assert con.execute("select status from runs").fetchone()[0] == "done"
    data = json.loads((tmp_path / "out.json").read_text())
    assert len(data["results"]) == len(sizes)


def test_boo_driver_csv_and_exit_codes(env, tmp_path):
    p = boo_driver([*GEMM.split(), "--iter", "10", "--csv", "d.csv", "--backend", "iree_boo", "--backend", "torch",
                    "--db", str(tmp_path / "r.db")], env, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0].startswith("gemm -k 16")
    assert ">>> iree_boo: min=" in p.stdout and ">>> torch: min=" in p.stdout
    header = next(csv.reader(open(tmp_path / "d.csv")))
    assert header == ["arguments",
                      "iree_boo min", "iree_boo max", "iree_boo mean", "iree_boo stddev", "iree_boo num_dispatches",
                      "torch min", "torch max", "torch mean", "torch stddev", "torch num_dispatches",
                      "iree_boo pct_roofline", "torch pct_roofline",
                      "iree_boo n", "torch n"]   # ours after iree-boo-driver's own

    cmds = tmp_path / "c.txt"
    cmds.write_text(f"{GEMM}\ngemm -k 0\n")
    p = boo_driver(["--commands-file", str(cmds), "--iter", "5", "--csv", "e.csv", "--db", str(tmp_path / "r.db")],
                   env, tmp_path)
    assert p.returncode == 1, p.stderr
    rows = list(csv.reader(open(tmp_path / "e.csv")))
    assert rows[2][1:6] == ["N.A."] * 5
    assert rows[1][1] not in ("N.A.", "")

    p = boo_driver(["--backend", "inductor", *GEMM.split()], env, tmp_path)
    assert p.returncode == 2 and "inductor" in p.stderr and "Traceback" not in p.stderr

    # the command quoted as one argument, as boo-tui takes it
    p = boo_driver([GEMM, "--iter", "5", "--db", str(tmp_path / "r.db")], env, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0].startswith("gemm -k 16") and ">>> min=" in p.stdout


BOO_NUMERICS = ["numerics_pass", "boo_vs_ref_mean", "boo_vs_ref_stddev", "boo_vs_ref_max", "pytorch_vs_ref_mean",
                "pytorch_vs_ref_stddev", "pytorch_vs_ref_max", "boo_vs_pytorch_mean", "boo_vs_pytorch_stddev",
                "boo_vs_pytorch_max", "structured_test"]


def test_boo_driver_verify_numerics_csv_and_tolerance_flags(env, tmp_path):
    """BOO's 11 numerics columns after the timing columns (a script reading BOO's CSV finds them by name and
    order), ours after; BOO's tolerance flags change the verdict; bad values are usage errors."""
    cmds = tmp_path / "c.txt"
    cmds.write_text(f"{GEMM}\ngemm -k 0\n")
    db = str(tmp_path / "r.db")
    p = boo_driver(["--commands-file", str(cmds), "--iter", "5", "--csv", "n.csv", "--db", db, "--verify-numerics",
                    "--numerics-min-samples", "2048", "--skip-structured-tests", "--numerics-verbose"], env, tmp_path)
    assert p.returncode == 1, p.stderr   # the bad line
    rows = list(csv.reader(open(tmp_path / "n.csv")))
    header = rows[0]
    assert header[:6] == ["arguments", "iree_boo min", "iree_boo max", "iree_boo mean", "iree_boo stddev",
                          "iree_boo num_dispatches"]
    assert header[6:17] == BOO_NUMERICS and header[17:] == ["numerics_max_rel_err", "numerics_reason",
                                                            "iree_boo pct_roofline", "iree_boo n"]
    good = dict(zip(header, rows[1]))
    assert good["numerics_pass"] == "PASS" and good["structured_test"] == "N.A."   # skipped
    assert float(good["boo_vs_ref_stddev"]) > 0 and "e" in good["boo_vs_ref_max"]  # BOO's %.6e
    assert rows[2][6:17] == ["N.A."] * 11
    assert "Numerics: PASS" in p.stdout and " n=2048:" in p.stdout    # 8 seeds of a 16x16 output

    # no error spread allowed at all: the same kernel fails
    p = boo_driver([*GEMM.split(), "--iter", "5", "--csv", "f.csv", "--db", db, "--verify-numerics",
                    "--numerics-stddev-rtol", "0", "--numerics-stddev-atol", "0"], env, tmp_path)
    assert p.returncode == 1 and "Numerics: FAIL (output 0: noisy" in p.stdout
    failed = dict(zip(*list(csv.reader(open(tmp_path / "f.csv")))))
    assert failed["numerics_pass"] == "FAIL" and failed["structured_test"] == "PASS"
    assert "noisy" in failed["numerics_reason"]

    for flag, value in [("--numerics-mean-rtol", "abc"), ("--numerics-stddev-atol", "-1"),
                        ("--numerics-min-samples", "0"), ("--numerics-reference-dtype", "float16")]:
        p = boo_driver([*GEMM.split(), flag, value, "--db", db], env, tmp_path)
        assert p.returncode == 2, (flag, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1 and flag in p.stderr and "Traceback" not in p.stderr


def test_miopen_verify_and_ignored_flags(env, tmp_path):
    """-V 1 checks that command's numerics where they are opt-in (boo-driver) or off (--no-numerics); -V 0
    leaves boo-tui's default check on; -w/-s are noted once per run, not per line."""
    cmds = tmp_path / "c.txt"
    cmds.write_text(f"{CONV} -F 1 -V 1 -w 1\n{CONV} -F 1 -s 1 -w 1\n")
    db = str(tmp_path / "r.db")
    p = boo_driver(["--commands-file", str(cmds), "--iter", "5", "--csv", "v.csv", "--db", db], env, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("MIOpenDriver flags with no meaning here") == 1 and "-w" in p.stderr
    assert p.stdout.count("Numerics: PASS") == 1   # only the -V 1 line
    rows = list(csv.reader(open(tmp_path / "v.csv")))
    assert rows[0][6] == "numerics_pass" and rows[1][6] == "PASS" and rows[2][6] == "N.A."

    p = boo_tui([f"{GEMM} -V 1", "--no-numerics", "--iter", "5", "--db", db, "--export", "a.csv"], env, tmp_path)
    assert p.returncode == 0, p.stderr
    assert [r["numerics"] for r in csv.DictReader(open(tmp_path / "a.csv")) if r["backend"] == "iree"] == ["pass"]
    p = boo_tui([f"{GEMM} -V 0", "--iter", "5", "--db", db, "--export", "b.csv"], env, tmp_path)
    assert p.returncode == 0, p.stderr
    assert [r["numerics"] for r in csv.DictReader(open(tmp_path / "b.csv")) if r["backend"] == "iree"] == ["pass"]


def test_boo_driver_preload_cross_compiles_without_running(env, tmp_path):
    cmds = tmp_path / "p.txt"
    cmds.write_text(f"{GEMM}\n{CONV} -F 1\ngemm -k 0\n")
    cache = tmp_path / "gpu-cache"
    p = boo_driver(["--preload", "--commands-file", str(cmds), "--target", "hip:gfx942", "--cache-dir", str(cache)],
                   env, tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr      # the bad line fails; the rest compiles
    assert f"invalid {cmds}:3: gemm:" in p.stdout and "1 invalid command line" in p.stdout, p.stdout
    vmfbs = list(cache.rglob("kernel.vmfb"))
    assert len(vmfbs) == 2
    p = boo_driver(["--preload", "--commands-file", str(cmds), "--target", "hip:gfx942", "--cache-dir", str(cache)],
                   env, tmp_path)
    assert "cached" in p.stdout.lower()
    assert len(list(cache.rglob("kernel.vmfb"))) == 2, "a second preload compiles nothing"


TORCH_PROBE = """
import sys
from boo_tui.cli import main
rc = main(sys.argv[1:])
print("torch in parent:", "torch" in sys.modules)
sys.exit(rc)
"""


def test_a_run_over_cached_kernels_never_imports_torch_in_the_front_end(env, tmp_path):
    """The front end only parses, looks kernels up, stores and exports; torch (~1 s to import) lives in the
    benchmark worker. That is what puts the first result of a cached run under 2 s."""
    args = [GEMM, "--iter", "5", "--db", str(tmp_path / "r.db"), "--export", "r.csv"]
    first = subprocess.run([sys.executable, "-c", TORCH_PROBE, *args], env=env, cwd=tmp_path, capture_output=True,
                           text=True, timeout=300)
    assert first.returncode == 0, first.stderr   # compiles (if needed) and writes the reproducer's inputs
    again = subprocess.run([sys.executable, "-c", TORCH_PROBE, *args], env=env, cwd=tmp_path, capture_output=True,
                           text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "torch in parent: False" in again.stdout
    rows = list(csv.DictReader(open(tmp_path / "r.csv")))
    assert {r["backend"] for r in rows} == {"iree", "torch"} and {r["status"] for r in rows} == {"done"}
    assert all(r["numerics"] == "pass" for r in rows if r["backend"] == "iree")


def _start_and_wait_measuring(args, env, cwd, db, timeout=240):
    """boo-tui headless in its own process group; returns once its first job is done (seen in the DB), so the
    second one is measuring (on the cpu target every compile of the batch finished before the first measurement,
    and measuring the next job starts at once)."""
    proc = subprocess.Popen([sys.executable, "-m", "boo_tui", *args], env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + timeout
    while time.time() < deadline:
        time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()[1]
        if not db.exists():
            continue
        try:
            con = sqlite3.connect(db, timeout=1)
            n = con.execute("select count(*) from results where status='done'").fetchone()[0]
            con.close()
        except sqlite3.Error:
            continue
        if n:
            time.sleep(0.3)   # well inside the measurement
            return proc
    proc.kill()
    raise AssertionError("never saw a job done")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_mid_run_stores_interrupted_and_resume_measures_it(env, tmp_path, sig):
    """Ctrl-C (SIGINT to the whole process group) or SIGTERM while measuring: no traceback from any process, the
    run and every unfinished job `interrupted` (never failed), the export written and marked partial, and
    --resume measures what was left and exits 0."""
    cmds = tmp_path / "cmds.txt"
    cmds.write_text(f"{GEMM}\ngemm -k 24 -m 24 -n 24\n")
    db = tmp_path / "r.db"
    args = [str(cmds), "--iter", "20", "--min-time", "2", "--backend", "iree", "--no-numerics", "--db", str(db),
            "--export", "out.csv", "--export", "out.md"]
    proc = _start_and_wait_measuring(args, env, tmp_path, db)
    os.killpg(proc.pid, sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err, err
    con = sqlite3.connect(db)
    assert con.execute("select status from runs").fetchone()[0] == "interrupted"
    statuses = sorted(s for (s,) in con.execute("select status from results"))
    con.close()
    assert statuses == ["done", "interrupted"], statuses
    rows = list(csv.DictReader(open(tmp_path / "out.csv")))
    assert sorted(r["status"] for r in rows) == ["done", "interrupted"]
    assert "partial: run interrupted" in (tmp_path / "out.md").read_text()
    assert "partial" in err

    p = boo_tui(args[:-4] + ["--min-time", "0", "--export", "out.csv", "--resume"], env, tmp_path)
    assert p.returncode == 0, p.stderr
    con = sqlite3.connect(db)
    assert con.execute("select status from runs").fetchone()[0] == "done"
    assert {s for (s,) in con.execute("select status from results")} == {"done"}
    con.close()


def test_killed_run_reads_interrupted_and_resume_without_inputs_runs_its_commands(env, tmp_path):
    """kill -9: the run's row still says running, but its process is gone: Store.list_runs / run_info say
    interrupted. `--resume` with no inputs measures the run's own commands (read back from the DB)."""
    from boo_engine.store import Store

    db = tmp_path / "r.db"
    args = [GEMM, "gemm -k 24 -m 24 -n 24", "--iter", "20", "--min-time", "2", "--backend", "iree",
            "--no-numerics", "--db", str(db), "--headless"]
    proc = _start_and_wait_measuring(args, env, tmp_path, db)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    con = sqlite3.connect(db)
    assert con.execute("select status from runs").fetchone()[0] == "running"   # what the row says
    con.close()
    with Store(db) as store:
        (run,) = store.list_runs()
        assert run["status"] == "interrupted"
        assert store.run_info(run["id"])["status"] == "interrupted"

    p = boo_tui(["--resume", "--db", str(db), "--headless"], env, tmp_path)
    assert p.returncode == 0, p.stderr
    assert "gemm -k 24 -m 24 -n 24" in p.stdout
    con = sqlite3.connect(db)
    assert con.execute("select count(*), min(status) from runs").fetchone() == (1, "done")
    assert sorted(s for (s,) in con.execute("select status from results")) == ["done", "done"]
    con.close()
