"""Children of the engine can be kept off the terminal (the dashboard needs it), output below Python included."""
from __future__ import annotations

import os
import subprocess
import sys


def test_child_output_goes_to_the_log_file_when_asked(tmp_path):
    log = tmp_path / "children.log"
    code = ("from boo_engine.process_setup import redirect_output_if_asked\n"
            "redirect_output_if_asked()\n"
            "import os, sys\n"
            "print('from python'); sys.stdout.flush()\n"
            "os.write(2, b'below python\\n')\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, BOO_CHILD_LOG=str(log)))
    assert p.returncode == 0 and p.stdout == "" and p.stderr == ""
    assert log.read_text() == "from python\nbelow python\n"


def test_without_the_variable_nothing_changes():
    code = "from boo_engine.process_setup import redirect_output_if_asked\nredirect_output_if_asked()\nprint('here')\n"
    env = {k: v for k, v in os.environ.items() if k != "BOO_CHILD_LOG"}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert p.stdout == "here\n"
