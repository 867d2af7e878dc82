"""Running a front end as the user does (a subprocess of this interpreter) and checking a refusal: shared by the
integrity tests."""
from __future__ import annotations

import subprocess
import sys


def run(args, env, cwd, *, prog="boo_tui", timeout=300, **kw):
    """`python -m PROG ARGS` in `cwd` with `env`: stdout and stderr captured as text unless `kw` says otherwise."""
    kw.setdefault("capture_output", True)
    return subprocess.run([sys.executable, "-m", prog, *map(str, args)], env=env, cwd=cwd, text=True,
                          timeout=timeout, **kw)


def refused(p, *words):
    """Exit 2, one line on stderr naming what is wrong, no traceback."""
    assert p.returncode == 2, (p.returncode, p.stdout[-500:], p.stderr[-2000:])
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert all(w in lines[0] for w in words), lines[0]
    return lines[0]
