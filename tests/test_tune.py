"""`boo-tui tune` end to end on this CPU: real compiles, real measurements, a real SQLite file.

- a tune of a conv finds a significantly faster configuration, and the emitted tuned.toml builds the same kernel
  (flags and spec) and, measured again by an ordinary session, is faster, at least about as much as the tune said;
- a candidate whose numerics differ from the baseline's (a flag that computes the matmul in bf16) is measured,
  recorded as such, and never emitted;
- a tune killed with SIGKILL resumes: the kernel it had finished is kept as it was, the rest is tuned;
- usage errors are one line and exit 2.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from boo_engine.compare import Verdict, next_run_interval
from boo_engine.comparisons import compare_results
from boo_engine.compile.flags import chosen_flags
from boo_engine.config import SessionConfig
from boo_engine.results import IREE
from boo_engine.session import Session
from boo_engine.tune.events import TuneUpdate
from boo_engine.tune.records import COMPILE_FAILED, IMPROVED, NUMERICS_FAILED, Tried, TunedKernel
from boo_engine.tune.report import write_outputs
from boo_engine.tune.search import Tuner, TuneSettings
from boo_engine.variants import BASELINE, load_variants_file

#: the kernel tuned: a small 3x3 weight-gradient conv, whose default is far from what the matmul formulation does
#: (0.087x [0.084, 0.090] on a Zen 4, quiet). The 1x1 NHWC conv tuned before (0.58x on an AVX-512 Xeon, 0.34-0.37x on
#: a Zen 3) had only 0.80-0.91x to find on the Zen 4, which a new process read as "unclear" under load (CI failed);
#: the 256x512x512 gemm before it had nothing to find on the Xeon.
KERNEL = "conv -n 2 -c 16 -H 16 -W 16 -k 16 -y 3 -x 3 -p 1 -q 1 -F 4"
#: computes the contraction with bf16 inputs: same interface, wrong numbers for an f32 kernel
WRONG = "--iree-global-opt-demote-contraction-inputs-type=bf16 --iree-global-opt-demote-contraction-inputs-operations=all"


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    d = tmp_path_factory.mktemp("tune")
    settings = TuneSettings(out_dir=str(d / "out"), db_path=str(d / "t.db"), cache_dir=str(d / "kernels"),
                            budget=8, final_s=1.0)
    stages: list[tuple[str, int | None]] = []

    def listen(event):
        if isinstance(event, TuneUpdate):   # the stage, and the benchmark worker process measuring then
            worker = tuner.session._measuring.stages[0]._worker if tuner.session is not None else None
            stages.append((event.stage, getattr(worker, "pid", None)))

    tuner = Tuner(settings, listener=listen)
    kernels = tuner.run([KERNEL])
    paths = write_outputs(settings.out_dir, kernels, tuner.environment, target="cpu", settings=settings.to_dict())
    tuner.stages = stages
    return tuner, kernels, paths, d


def test_a_tune_finds_a_significantly_faster_configuration(tuned):
    tuner, kernels, paths, d = tuned
    (k,) = kernels.values()
    assert k.status == IMPROVED, k.message
    assert k.verdict == Verdict.FASTER and k.ci_high < 1.0 and k.ratio <= 1 - 0.03
    assert k.best is not None and k.best.stage == "final"
    with sqlite3.connect(d / "t.db") as c:   # every candidate stored, with its run
        rows = c.execute("SELECT status, stage, run_id FROM tune_candidates").fetchall()
        status = c.execute("SELECT status FROM tunes").fetchone()[0]
    assert len(rows) == len(k.tried) >= 4 and all(r[2] for r in rows if r[0] == "measured")
    assert status == "done"
    assert {p.name for p in paths} >= {"tuned.toml", "report.md"}
    report = (d / "out" / "report.md").read_text()
    assert k.func_name in report and f"{k.ratio:.3f}" in report
    # beside its own interval, where a new session should land; the winner is emitted only when that stays < 1
    assert k.ratio is not None and k.ci_low is not None and k.ci_high is not None
    lo, hi = next_run_interval(k.ratio, k.ci_low, k.ci_high)
    assert lo < k.ci_low and k.ci_high < hi < 1.0, (lo, hi, k.ci_low, k.ci_high)
    assert f"[{lo:.3f}, {hi:.3f}]" in report and "a new session" in report and "a new session" in k.message


def test_the_winner_is_verified_in_a_new_worker_process_before_it_is_emitted(tuned):
    tuner, kernels, _, _ = tuned
    (k,) = kernels.values()
    names = [stage for stage, _ in tuner.stages]
    assert "final" in names and "verify" in names and names.index("verify") > names.index("final"), names
    final_pid = next(pid for stage, pid in tuner.stages if stage == "final")
    done_pid = [pid for stage, pid in tuner.stages if stage == "done"][-1]   # after the verification measured
    assert final_pid is not None and done_pid is not None and done_pid != final_pid, tuner.stages
    assert "verified in a new process" in k.message, k.message
    assert k.best is not None and (k.ratio, k.ci_high) == (k.best.ratio, k.best.ci_high)   # the verified figures


def test_the_winner_is_measured_against_the_best_known_kernel_too(tuned):
    """The verification measures the kernel's best known configuration (the best column's) interleaved with the
    winner, so the report says whether the tune found more than the best column already had."""
    _, kernels, _, d = tuned
    (k,) = kernels.values()
    assert "the best known kernel" in k.message, k.message
    with sqlite3.connect(d / "t.db") as c:
        rows = c.execute("SELECT r.status, r.n FROM results r JOIN variants v ON v.id = r.variant_id"
                         " WHERE v.name = 'known-1'").fetchall()
    assert rows and all(status == "done" and n for status, n in rows), rows


@pytest.mark.parametrize("verdict, emitted", [(Verdict.SLOWER, False), (Verdict.SAME, True),
                                              (Verdict.UNCLEAR, True), (Verdict.FASTER, True)])
def test_a_winner_slower_than_the_best_known_kernel_is_not_emitted(verdict, emitted):
    """Emitted, a tune's winner replaces the kernel in the best column (a finished tune's winner comes first):
    one significantly slower than what the best column picks would make it slower."""
    from boo_engine.compare import Comparison
    from boo_engine.tune.known import against_known

    ratio = {Verdict.SLOWER: 1.4, Verdict.FASTER: 0.7}.get(verdict, 1.0)
    cmp = Comparison(ratio=ratio, ci_low=ratio * 0.95, ci_high=ratio * 1.05, p_value=0.01, verdict=verdict,
                     n_baseline=40, n_variant=40, baseline_median_us=100.0, variant_median_us=100.0 * ratio)
    ok, note = against_known(cmp)
    assert ok is emitted and "best known kernel" in note and f"{ratio:.3f}x" in note
    assert ("not emitted" in note) is (not emitted)
    assert against_known(None, "failed: no compiler")[0] is True


def test_a_numerically_wrong_candidate_is_recorded_and_never_emitted(tmp_path):
    """bf16 contraction inputs for an f32 gemm (the conv above is past their reach: its 1x1 contraction is no
    named op by then, and the flag left it exact): a short tune of its own."""
    d = tmp_path
    settings = TuneSettings(out_dir=str(d / "out"), db_path=str(d / "t.db"), cache_dir=str(d / "kernels"),
                            budget=8, final_s=0.5, try_flags=(WRONG,))
    tuner = Tuner(settings)
    kernels = tuner.run(["gemm --a_w 64 --a_h 128 --b_w 128"])
    write_outputs(settings.out_dir, kernels, tuner.environment, target="cpu", settings=settings.to_dict())
    (k,) = kernels.values()
    wrong = [t for t in k.tried if "demote-contraction" in " ".join(t.params.get("flags") or [])]
    assert len(wrong) == 1 and wrong[0].status == NUMERICS_FAILED, [(t.status, t.error) for t in wrong]
    assert wrong[0].median_us is not None            # measured: "fast but wrong" is in the record
    assert k.best_key != wrong[0].key
    assert "demote-contraction" not in (d / "out" / "tuned.toml").read_text()


def test_a_tune_whose_candidates_did_not_compile_is_a_done_run(tmp_path):
    """A tune that exited 0 was stored as a `failed` run because candidates did not compile: a pruned
    candidate is an outcome of the search, not a failure of the run (only the baseline's is)."""
    d = tmp_path
    settings = TuneSettings(out_dir=str(d / "out"), db_path=str(d / "t.db"), cache_dir=str(d / "kernels"),
                            budget=8, final_s=0.3, try_flags=("--iree-hal-target-device=no-such-device",))
    kernels = Tuner(settings).run(["gemm --a_w 16 --a_h 16 --b_w 16"])
    (k,) = kernels.values()
    assert any(t.status == COMPILE_FAILED for t in k.tried), [(t.status, t.error) for t in k.tried]
    with sqlite3.connect(d / "t.db") as c:
        statuses = [r[0] for r in c.execute("SELECT status FROM runs")]
        failed_jobs = c.execute("SELECT count(*) FROM results WHERE status = 'failed'").fetchone()[0]
    c.close()
    assert failed_jobs >= 1 and statuses and set(statuses) == {"done"}, (statuses, failed_jobs)


def test_ranking_never_takes_a_wrong_or_unapplied_candidate():
    from boo_engine.tune.kernel import KernelSearch

    k = TunedKernel(func_name="f", command="c")
    k.tried = [Tried("f", "a", {}, "t-a", status=NUMERICS_FAILED, ratio=0.2),
               Tried("f", "b", {}, "t-b", status="not_applied", ratio=0.3),
               Tried("f", "c", {}, "t-c", ratio=0.9)]
    ctx = KernelSearch.__new__(KernelSearch)
    ctx.k = k
    assert [t.key for t in ctx.ranked()] == ["c"]


def test_the_emitted_variants_file_measures_as_the_tune_said(tuned):
    tuner, kernels, _, d = tuned
    (k,) = kernels.values()
    variants = [BASELINE, *load_variants_file(d / "out" / "tuned.toml")]
    assert [v.name for v in variants] == ["baseline", "tuned"]
    config = SessionConfig(target="cpu", variants=variants, backends=(IREE,), db_path=str(d / "check.db"),
                           cache_dir=str(d / "kernels"), min_time_s=2.0, iters=20)
    with Session(config) as session:
        session.add_command(KERNEL)
        session.start()
        session.wait()
        jobs = list(session.jobs.values())
        (cmp,) = compare_results(jobs, min_effect=0.03).values()
    tuned_job = next(j for j in jobs if j.variant == "tuned")
    assert tuned_job.compile is not None and tuned_job.compile.spec_applied is not False
    # the emitted file builds the tune's winner: the same flags and the same spec (by content), exactly
    assert k.best is not None
    with sqlite3.connect(d / "t.db") as c:
        (winner_command,) = c.execute("SELECT k.compile_command FROM results r JOIN kernels k ON k.id = r.kernel_id "
                                      "WHERE r.job_id = ?", (k.best.job_id,)).fetchone()
    assert _as_built(json.loads(winner_command)) == _as_built(tuned_job.compile.command)
    assert cmp.verdict == Verdict.FASTER, cmp
    # at least about as fast as the tune said, within the noise of two separate measurements. Only this side is
    # bounded: the same binary has read both ways across worker processes (0.755 here against the tune's
    # [0.627, 0.632] once; 0.589 against [0.864, 0.892] another time, the final's samples flagged noisy), and what
    # a lower bound would catch (a better configuration emitted than the one the tune measured) the check above
    # catches exactly
    assert cmp.ratio <= k.ci_high * 1.25, (cmp.ratio, k.ci_low, k.ci_high)


def _as_built(command: list[str]) -> list[str]:
    """The flags an iree-compile command chose, a file named by a flag (a tuning spec) as its content's digest:
    the tune's candidate and the emitted variant keep their specs in different places."""
    out = []
    for flag in chosen_flags(command):
        name, _, value = flag.partition("=")
        path = Path(value)
        out.append(f"{name}=sha256:{hashlib.sha256(path.read_bytes()).hexdigest()}" if value and path.is_file()
                   else flag)
    return out


def _cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "boo_tui.cli", "tune", *args], capture_output=True, text=True,
                          timeout=600, **kw)


def test_a_killed_tune_resumes_and_keeps_what_it_finished(tmp_path):
    db, out, kernels = tmp_path / "t.db", tmp_path / "out", tmp_path / "kernels"
    cmds = tmp_path / "cmds.txt"
    cmds.write_text("gemm --a_w 32 --a_h 32 --b_w 32\ngemm --a_w 48 --a_h 48 --b_w 48\n")
    args = [str(cmds), "--out", str(out), "--db", str(db), "--cache-dir", str(kernels), "--budget", "3",
            "--final-time", "0.3"]
    proc = subprocess.Popen([sys.executable, "-m", "boo_tui.cli", "tune", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    first = None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        if not db.exists():
            continue
        try:
            with sqlite3.connect(db) as c:
                first = c.execute("SELECT func_name, status, candidates, seconds FROM tune_kernels "
                                  "WHERE status != 'running'").fetchone()
        except sqlite3.Error:
            continue
        if first:
            os.killpg(proc.pid, signal.SIGKILL)   # the whole group: the tune, its workers and compilers
            break
    proc.wait(timeout=30)
    assert first is not None, "the first kernel never finished before the tune exited"
    assert proc.returncode == -signal.SIGKILL, "the tune finished before it could be killed"
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT status FROM tunes").fetchone()[0] == "running"   # as the kill left it
    r = _cli(str(cmds), "--resume", "--out", str(out), "--db", str(db), "--cache-dir", str(kernels),
             "--budget", "3", "--final-time", "0.3")
    assert r.returncode == 0, r.stderr
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT func_name, status, candidates, seconds FROM tune_kernels ORDER BY func_name"
                         ).fetchall()
        tunes = c.execute("SELECT count(*), max(status) FROM tunes").fetchone()
    assert tunes == (1, "done")
    assert len(rows) == 2 and all(row[1] != "running" for row in rows)
    assert first in rows, "the kernel finished before the kill was tuned again"
    report = (out / "report.md").read_text()
    assert "gemm_float32_forward_32x32x32" in report and "gemm_float32_forward_48x48x48" in report


@pytest.mark.parametrize("args, needle", [
    (["--budget", "0", "gemm --a_w 8 --a_h 8 --b_w 8"], "--budget"),
    ([], "nothing to tune"),
    (["conv -n 1 -c 2 -H 4 -W 4 -k 2 -y 9 -x 9 -F 1"], "conv"),
    (["--try-flags=notaflag", "gemm --a_w 8 --a_h 8 --b_w 8"], "--try-flags"),
])
def test_usage_errors_are_one_line_and_exit_2(tmp_path, args, needle):
    r = _cli(*args, "--db", str(tmp_path / "t.db"), "--out", str(tmp_path / "out"))
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr, r.stderr


def test_resume_without_a_stored_tune_is_a_usage_error(tmp_path):
    r = _cli("--resume", "--db", str(tmp_path / "t.db"), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "no tune" in r.stderr, r.stderr


def test_a_stopped_tune_is_left_resumable_not_finished(tmp_path):
    """stop() mid-search (the dashboard's Escape, a Ctrl-C): the kernel being searched is stored as running, no
    interrupted measurement is stored as a failed candidate, and the tune ends interrupted."""
    import threading

    from boo_engine.store import Store
    from boo_engine.tune.events import TuneUpdate
    from boo_engine.tune.records import RUNNING, find_tune, load_kernels

    holder = {}

    def listener(event):
        if isinstance(event, TuneUpdate) and event.stage == "tiles" and event.tried >= 1 and "t" not in holder:
            holder["t"] = threading.Thread(target=holder["tuner"].stop)   # as a front end: from another thread
            holder["t"].start()

    settings = TuneSettings(out_dir=str(tmp_path / "out"), db_path=str(tmp_path / "t.db"),
                            cache_dir=str(tmp_path / "kernels"), budget=12, batch=2)
    holder["tuner"] = tuner = Tuner(settings, listener=listener)
    kernels = tuner.run(["gemm --a_w 32 --a_h 32 --b_w 32"])
    (k,) = kernels.values()
    assert tuner.stopped and k.status == RUNNING, (k.status, k.message)
    with Store(tmp_path / "t.db") as store:
        assert find_tune(store, "last")["status"] == "interrupted"
        stored = load_kernels(store, tuner.tune_id)
    assert stored[k.func_name].status == RUNNING
    assert all("interrupted" not in (t.error or "") for t in stored[k.func_name].tried)


@pytest.mark.parametrize("target", ["hip:gfx942", "cuda:sm_80"])
def test_a_gpu_target_without_the_gpu_compiles_its_candidates_and_measures_none(tmp_path, target):
    """A GPU target on this CPU-only host: candidates from the search's own sampler, compiled (configuration
    applied: by a spec on hip, by a substituted dispatch on cuda, whose IREE 3.13 pipeline ignores specs),
    nothing measured, no verdict; the cache now holds them for the machine with the GPU."""
    r = _cli("gemmfp16 --a_w 64 --a_h 128 --b_w 128 -F 1", "--target", target, "--budget", "4",
             "--db", str(tmp_path / "t.db"), "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "k"))
    assert r.returncode == 0, r.stderr
    with sqlite3.connect(tmp_path / "t.db") as c:
        kernel = c.execute("SELECT status, message FROM tune_kernels").fetchone()
        cands = c.execute("SELECT status, error, spec FROM tune_candidates").fetchall()
        runs = c.execute("SELECT count(*) FROM results").fetchone()[0]
    assert kernel[0] == "compiled_only" and target in kernel[1], kernel
    assert len(cands) == 4 and runs == 0
    assert all(s == "compiled" for s, _, _ in cands), cands
    assert all(spec and "iree_gpu.lowering_config" in spec for _, _, spec in cands)


def test_an_output_folder_that_cannot_be_written_is_refused_before_any_work(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")   # (a read-only folder would not stop root, who runs CI here)
    r = _cli("gemm --a_w 8 --a_h 8 --b_w 8", "--db", str(tmp_path / "t.db"), "--out", str(blocker / "out"))
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "--out" in lines[0], r.stderr
    assert not (tmp_path / "t.db").exists()   # nothing started
