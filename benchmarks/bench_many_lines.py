"""A commands file of many lines, planned and stored: wall time and peak memory for N = 5k, 20k, 200k lines.

Goal (issue 24): 200k lines of any kind planned and stored in under 30 s, with flat memory (the peak RSS at 200k
close to the one at 20k), and one signal stops it cleanly.

Kinds of file:
- `bad`: every line a distinct line that does not parse (each one a failed row naming file:line);
- `bad-dup`: the same bad line N times;
- `dup`: the same valid conv N times;
- `distinct`: N distinct valid convs (channels x spatial x filters vary);
- `mixed`: N distinct valid lines, a fifth each of conv, gemm, layer norm, batch norm and aten:: calls, made from
  the lines of sample_commands.txt (and of `--convs FILE`, e.g. a model's real convs) and a few batch-norm and
  aten templates by giving each a batch size (or M) of its own.

`bad` and `bad-dup` run the real `boo-tui --headless` (with `--export` to a CSV, so stdout is not a 200k-row table)
against a fresh database: nothing compiles, every line is a stored failed row, and the run ends. boo-tui has no
plan-only mode, so a file of valid lines would be compiled and measured; `dup` and `distinct` instead run the
session API in a child process: plan every line as the headless run does (`session.spool.add_inputs` with its
KEEP: past it, the jobs are stored as queued and dropped; `--hold`: every job held and stored by `start()`, the
run before spooling), then stop at once (`interrupt()`: every job stored again as interrupted, as one Ctrl-C
does) and close. Each case runs in its
own process with a fresh temporary database and kernel cache; its peak RSS is that process's own VmHWM (read
from /proc while it runs, the last reading kept), beside wait4's ru_maxrss (the largest of it and its children).
Reported per case: wall seconds, CPU seconds (user + system: what other processes on the machine do not
change; `cpu_s` with the processes it started and waited for, such as the benchmark worker that start() starts,
`cpu_self_s` the session's process alone), peak RSS (MiB), the rows in the database, the run's status, the exit
code.

    python3 benchmarks/bench_many_lines.py [--sizes 5000,20000,200000] [--kinds bad,bad-dup,dup,distinct,mixed]
                                           [--convs FILE] [--timeout 600] [--signal TERM|INT]

With --signal, each case is instead the real `boo-tui --headless` on the file (any kind), sent the signal (to its
process group, as Ctrl-C is) as soon as its first rows are in the database: reported are how long it took to
leave after the signal, its exit code, the run's status and the rows it kept.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KINDS = ("bad", "bad-dup", "dup", "distinct", "mixed")
VALID = "conv -n 1 -c 4 -H 8 -W 8 -k 4 -y 3 -x 3 -p 1 -q 1 --iter 5"
ROOT = Path(__file__).resolve().parents[1]
#: `mixed`: where a template's size goes (N: a number of its own for each line made of it)
_SIZED = (("-n ", re.compile(r"-n \d+")), ("--a_w ", re.compile(r"--a_w \d+")), ("--input ", re.compile(r"--input \d+")))
_BNORMS = ("bnorm -n N -c 64 -H 28 -W 28 -m 1 -F 1",
           "bnormbfp16 -n N -c 128 -H 14 -W 14 -m 1 -F 0 -b 1 -s 1 --layout NHWC",
           "bnorm -n N -c 32 -H 56 -W 56 -m 0 -F 2 -r 1")
_ATENS = ("""aten::mm "[[N, 512], [512, 768]]" "['float', 'float']" "[[512, 1], [768, 1]]" "['', '']\"""",
          """aten::addmm "[[512], [N, 512], [512, 512], [], []]" "['c10::BFloat16', 'c10::BFloat16', 'c10::BFloat16', """
          """'Scalar', 'Scalar']" "[[1], [512, 1], [1, 512], [], []]" "['', '', '', '1', '1']\"""")


def mixed_templates(convs: str | None = None) -> list[list[str]]:
    """The `mixed` kind's templates, per family (conv, gemm, layer norm, batch norm, aten): each line of
    sample_commands.txt (and of `convs`) with its batch size (conv), M (gemm) or first dim (layer norm) as `N`."""
    families: dict[str, dict[str, None]] = {"conv": {}, "gemm": {}, "layernorm": {}}
    for path in [ROOT / "sample_commands.txt", *([Path(convs)] if convs else [])]:
        for line in path.read_text().splitlines():
            line = line.strip()
            family = next((f for f in families if line.startswith(f)), None)
            if family is None or line.startswith("#"):
                continue
            for flag, pattern in _SIZED:
                line = pattern.sub(flag + "N", line, count=1)
            families[family][line] = None
    return [list(families["conv"]), list(families["gemm"]), list(families["layernorm"]), list(_BNORMS),
            list(_ATENS)]


def mixed_line(templates: list[list[str]], i: int) -> str:
    """Line i of a `mixed` file: family i % 5, each of its templates in turn, with a size no other line of that
    template has."""
    family = templates[i % len(templates)]
    j = i // len(templates)
    size = str(1 + j // len(family))
    return family[j % len(family)].replace("-n N", "-n " + size).replace("--a_w N", "--a_w " + size) \
        .replace("--input N", "--input " + size).replace("[N, ", f"[{size}, ")


def write_lines(path: Path, kind: str, n: int, convs: str | None = None) -> None:
    """N lines of `kind` (see the module doc)."""
    templates = mixed_templates(convs) if kind == "mixed" else []
    with path.open("w") as fh:
        for i in range(n):
            if kind == "mixed":
                line = mixed_line(templates, i)
            elif kind == "bad":
                line = f"conv -n 1 -c {i} -H x{i} -W 8 -k 4"           # -H is no integer: a failed row per line
            elif kind == "bad-dup":
                line = "conv -n 1 -c 4 -H x -W 8 -k 4"
            elif kind == "dup":
                line = VALID
            else:
                c, k, hw = 1 + i % 64, 1 + (i // 64) % 64, 4 + i // 4096
                line = f"conv -n 1 -c {c} -H {hw} -W {hw} -k {k} -y 3 -x 3 -p 1 -q 1 --iter 5"
            fh.write(line + "\n")


def child(kind: str, commands: str, db: str, cache: str, hold: str = "") -> int:
    """The session-API case, in its own process: plan, store as queued, interrupt, close."""
    from boo_engine.cli.spooled import KEEP
    from boo_engine.session import Session, SessionConfig

    t0 = time.monotonic()
    session = Session(SessionConfig(target="cpu", db_path=db, cache_dir=cache, command_line=f"bench {kind}"))
    try:
        # as the headless run plans: past KEEP jobs the run is spooled (stored, dropped; --hold to compare)
        n_jobs = session.spool.add_inputs([commands], 10**9 if hold else KEEP)
        t_plan = time.monotonic()
        if not session.spool.spooled:
            session.start()   # (held: every row stored as queued, as start() stores them)
        t_start = time.monotonic()
        session.interrupt()
    finally:
        session.close()
    t_end = time.monotonic()
    own = resource.getrusage(resource.RUSAGE_SELF)   # this process alone: not the benchmark worker it started
    print(json.dumps({"jobs": n_jobs, "spooled": session.spool.spooled, "plan_s": round(t_plan - t0, 2), "start_s": round(t_start - t_plan, 2),
                      "interrupt_close_s": round(t_end - t_start, 2),
                      "cpu_self_s": round(own.ru_utime + own.ru_stime, 2)}), file=sys.stderr)
    return 0


def run_case(kind: str, n: int, timeout: float, convs: str | None = None, hold: bool = False) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="boo-many-lines-"))
    try:
        commands, db, cache = tmp / "lines.txt", tmp / "results.db", tmp / "cache"
        write_lines(commands, kind, n, convs)
        env = dict(os.environ, BOO_DB=str(db))
        if kind.startswith("bad"):
            argv = [sys.executable, "-m", "boo_tui.cli", "--headless", "--target", "cpu", "--db", str(db),
                    "--cache-dir", str(cache), "--export", str(tmp / "out.csv"), str(commands)]
        else:
            argv = [sys.executable, __file__, "--child", kind, str(commands), str(db), str(cache), "hold" if hold else ""]
        t0 = time.monotonic()
        errfile = (tmp / "stderr.txt").open("w")   # a file, not a pipe: 200k lines of stderr must not block it
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=errfile, env=env)
        timed_out, hwm_kib = False, 0
        while True:
            hwm_kib = max(hwm_kib, vm_hwm_kib(proc.pid))
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - t0 > timeout:
                timed_out = True
                proc.send_signal(signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        wall = time.monotonic() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        errfile.close()
        err = (tmp / "stderr.txt").read_text(errors="replace")
        rows, run_status = count_rows(db)
        detail = next((ln for ln in reversed(err.splitlines()) if ln.startswith("{")), "")
        return {"kind": kind, "lines": n, "wall_s": round(wall, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
                "peak_rss_mib": round(hwm_kib / 1024), "peak_rss_any_child_mib": round(usage.ru_maxrss / 1024),
                "rows": rows, "run": run_status, "exit": proc.returncode, "timed_out": timed_out,
                **(json.loads(detail) if detail else {}),
                **({"stderr_tail": err.strip().splitlines()[-1][:200]} if proc.returncode not in (0, 1) and err
                   else {})}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def vm_hwm_kib(pid: int) -> int:
    """The process's own peak RSS so far (VmHWM; wait4's ru_maxrss is the largest of it and its children: the
    benchmark worker importing torch)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def stop_case(kind: str, n: int, sig: int, timeout: float) -> dict:
    """The real `boo-tui --headless` on N lines of `kind`, sent `sig` once its first rows are stored: how long it
    takes to leave, its exit code, the run's status and the rows kept."""
    tmp = Path(tempfile.mkdtemp(prefix="boo-many-lines-"))
    try:
        commands, db = tmp / "lines.txt", tmp / "results.db"
        write_lines(commands, kind, n)
        argv = [sys.executable, "-m", "boo_tui.cli", "--headless", "--target", "cpu", "--db", str(db),
                "--cache-dir", str(tmp / "cache"), "--export", str(tmp / "out.csv"), str(commands)]
        with (tmp / "stderr.txt").open("w") as errfile:
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=errfile, start_new_session=True)
        t0 = time.monotonic()
        while count_rows(db)[0] == 0 and proc.poll() is None and time.monotonic() - t0 < timeout:
            time.sleep(0.02)
        rows_at_signal = count_rows(db)[0]
        t_signal = time.monotonic()
        os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        rows, run_status = count_rows(db)
        return {"kind": kind, "lines": n, "signal": signal.Signals(sig).name,
                "signal_after_s": round(t_signal - t0, 2), "rows_at_signal": rows_at_signal,
                "exit_after_signal_s": round(time.monotonic() - t_signal, 2), "exit": proc.returncode,
                "rows_kept": rows, "run": run_status}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def count_rows(db: Path) -> tuple[int, str]:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            rows = conn.execute("SELECT count(*) FROM results").fetchone()[0]
            run = conn.execute("SELECT status FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        finally:
            conn.close()
        return int(rows), run[0] if run else "-"
    except sqlite3.Error as e:
        return 0, f"({e})"


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        return child(*sys.argv[2:7])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="5000,20000,200000")
    p.add_argument("--kinds", default=",".join(KINDS))
    p.add_argument("--timeout", type=float, default=600.0, help="kill a case after this many seconds")
    p.add_argument("--convs", default=None, metavar="FILE",
                   help="`mixed`: conv lines to make its convs of too (e.g. a model's real convs)")
    p.add_argument("--hold", action="store_true",
                   help="session cases: hold every job in memory (the run before spooling) instead of spooling past "
                        "the headless run's KEEP jobs")
    p.add_argument("--signal", choices=["TERM", "INT"], default=None,
                   help="instead: send this signal once the first rows are stored, and time the stop")
    args = p.parse_args()
    for kind in args.kinds.split(","):
        if kind not in KINDS:
            p.error(f"unknown kind {kind!r} (one of {', '.join(KINDS)})")
        for n in (int(s) for s in args.sizes.split(",")):
            if args.signal:
                out = stop_case(kind, n, getattr(signal, f"SIG{args.signal}"), args.timeout)
            else:
                out = run_case(kind, n, args.timeout, args.convs, args.hold)
            print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
