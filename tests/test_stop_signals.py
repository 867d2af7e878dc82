"""How a front end stops (boo_engine/cli/signals.py): the first signal asks for a clean stop, a second one exits
at once. Checked in a real process receiving real signals (the end-to-end runs are in test_cli_headless.py; a
clean stop there takes well under a second, too fast to tell "at once" from it)."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

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
