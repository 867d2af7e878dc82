"""boo-driver honours --iter or says why not, per line, in the CSV and on stderr; and a redirected run shows each
command's lines as soon as it is done, not all of them at the end."""
from __future__ import annotations

import csv
import subprocess
import sys
import time


def test_fewer_samples_than_iter_asked_is_said_on_the_line_on_stderr_and_in_the_csv(tmp_path, cli_env):
    """A 7 s bf16 mm got 8 of its 100 samples in the 60 s per-job limit, silently; the CSV had no count."""
    out = tmp_path / "r.csv"
    p = subprocess.run([sys.executable, "-m", "boo_engine.cli.driver", "gemm", "-m", "32", "-n", "32", "-k", "32",
                        "--iter", "100000000", "--max-time", "0.5", "--db", str(tmp_path / "r.db"), "--csv", str(out)],
                       env=cli_env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith(">>>"))
    n = int(line.split(" n=")[1].split()[0])
    assert 0 < n < 100000000, line
    assert "of the 100000000 samples --iter asked: the job's time limit (--max-time" in p.stderr, p.stderr
    rows = list(csv.DictReader(out.open()))
    assert rows[0]["iree_boo n"] == str(n)
    bad = subprocess.run([sys.executable, "-m", "boo_engine.cli.driver", "gemm", "-m", "8", "-n", "8", "-k", "8",
                          "--max-time", "0"], env=cli_env, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--max-time must be positive" in bad.stderr, bad.stderr


def test_each_commands_lines_come_as_soon_as_it_is_done(tmp_path, cli_env):
    """Redirected, nothing came for 5 minutes: every line was printed at the end of the run."""
    cmds = tmp_path / "c.txt"
    cmds.write_text("gemm -m 16 -n 16 -k 16 --iter 20\ngemm -m 24 -n 24 -k 24 --iter 20\n")
    proc = subprocess.Popen([sys.executable, "-m", "boo_engine.cli.driver", "--commands-file", str(cmds),
                             "--min-time", "6", "--db", str(tmp_path / "r.db")], env=cli_env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        first = [proc.stdout.readline() for _ in range(2)]
        t_first = time.monotonic()
        rest = proc.stdout.read()
        assert proc.wait(timeout=300) == 0
        ahead = time.monotonic() - t_first   # the second command measured >= 6 s after the first's lines came
    finally:
        proc.kill()
    assert first[0].startswith("gemm -m 16") and first[1].startswith(">>> min="), first
    assert ahead > 4, f"the first command's lines came {ahead:.1f} s before the end of the run"
    assert "gemm -m 24" in rest
