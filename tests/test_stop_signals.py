"""How a front end stops (boo_engine/cli/signals.py): the first signal asks for a clean stop, a second one exits
at once. Checked in a real process receiving real signals (the end-to-end runs are in test_cli_headless.py; a
clean stop there takes well under a second, too fast to tell "at once" from it)."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

CHILD = textwrap.dedent("""
    import os, signal, sys, time
    from boo_engine.cli.signals import StopSignals

    marker = sys.argv[1]
    stops = StopSignals("probe", hard_exit=lambda: open(marker, "w").write("killed the workers"))
    stops.install()
    stops.raising = False                 # a run is under way: the first signal must not raise
    os.kill(os.getpid(), SIG)
    time.sleep(0.2)
    assert stops.received == SIG and stops.event.is_set(), "the first signal is remembered"
    print("first signal noticed, still running", flush=True)
    os.kill(os.getpid(), SIG)             # the second: out at once, whatever the main thread is doing
    time.sleep(5)
    print("still alive after the second signal", flush=True)
""")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_first_signal_asks_to_stop_second_exits_at_once(tmp_path, sig):
    marker = tmp_path / "hard-exit"
    proc = subprocess.run([sys.executable, "-c", CHILD.replace("SIG", f"signal.{sig.name}"), str(marker)],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 128 + sig, proc.stdout + proc.stderr
    assert "first signal noticed, still running" in proc.stdout
    assert "still alive" not in proc.stdout
    assert marker.read_text() == "killed the workers"          # the workers are killed before leaving
    assert f"{sig.name} again: exiting now" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_before_the_run_the_first_signal_interrupts_the_main_thread(tmp_path):
    code = textwrap.dedent("""
        import os, signal
        from boo_engine.cli.signals import StopSignals
        stops = StopSignals("probe").install()
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        except KeyboardInterrupt:
            raise SystemExit(stops.exit_code)
        raise SystemExit(0)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr


# ---- a real run stopped while it stores the rows of a big commands file -------------------------------------

ROOT = Path(__file__).resolve().parents[1]
LINES = 50_000


def _commands_file(path: Path, kind: str) -> Path:
    """LINES lines: each a distinct line that does not parse (a failed row each), or one valid conv repeated (a
    queued row each, for the iree and the torch backend)."""
    with path.open("w") as fh:
        for i in range(LINES):
            fh.write(f"conv -n 1 -c {i} -H x{i} -W 8 -k 4\n" if kind == "bad" else
                     "conv -n 1 -c 4 -H 8 -W 8 -k 4 -y 3 -x 3 -p 1 -q 1 --iter 5\n")
    return path


def _stored_rows(db: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return con.execute("select count(*) from results").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:   # not created yet, or its schema not yet there
        return 0


@pytest.mark.parametrize(("kind", "sig"), [("bad", signal.SIGTERM), ("valid", signal.SIGINT)])
def test_one_signal_while_storing_a_big_file_stops_the_run_cleanly(cli_env, tmp_path, kind, sig):
    """One SIGTERM (or Ctrl-C: SIGINT to the process group) while the rows of a 50,000-line file are being stored:
    the process leaves on its own (the guard below is a hang guard only: it used to go on storing for many
    minutes), exits 128 + the signal's number without a traceback, the run is `interrupted` (not `running`), the
    rows stored are kept, and none of them still says queued."""
    cmds = _commands_file(tmp_path / "lines.txt", kind)
    db = tmp_path / "r.db"
    env = dict(cli_env, PYTHONPATH=os.pathsep.join([str(ROOT), cli_env.get("PYTHONPATH", "")]))
    stderr = tmp_path / "stderr.txt"   # a file: a pipe nobody reads would stop it at the 50,000 bad lines' report
    with stderr.open("w") as err_file:
        proc = subprocess.Popen([sys.executable, "-m", "boo_tui", str(cmds), "--target", "cpu", "--db", str(db),
                                 "--export", str(tmp_path / "out.csv")], env=env, cwd=tmp_path,
                                stdout=subprocess.DEVNULL, stderr=err_file, start_new_session=True)
    try:
        deadline = time.monotonic() + 300   # planning 50,000 lines takes seconds (it took minutes for copies)
        while _stored_rows(db) == 0:
            assert proc.poll() is None, stderr.read_text()[-2000:]
            assert time.monotonic() < deadline, "no row was ever stored"
            time.sleep(0.05)
        os.killpg(proc.pid, sig)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    err = stderr.read_text()
    assert proc.returncode == 128 + sig, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    assert f"{signal.Signals(sig).name}: stopping" in err
    if kind == "valid":   # the jobs the stop left are counted in one line, not listed (100,000 lines here)
        listed = sum(1 for ln in err.splitlines() if ln.startswith("interrupted "))
        assert listed == 0 and "not measured (interrupted)" in err, (listed, err[-2000:])
    con = sqlite3.connect(db)
    assert con.execute("pragma integrity_check").fetchone()[0] == "ok"
    assert con.execute("select status from runs").fetchall() == [("interrupted",)]
    statuses = dict(con.execute("select status, count(*) from results group by status").fetchall())
    con.close()
    assert sum(statuses.values()) > 0, "what was stored is kept"
    assert set(statuses) == ({"failed"} if kind == "bad" else {"interrupted"}), statuses
