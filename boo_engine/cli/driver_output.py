"""What boo-driver prints, as iree-boo-driver does: per command and backend a timing line (and with
--verify-numerics the numerics), measured as the session finishes each command's jobs."""
from __future__ import annotations

import sys
from collections.abc import Sequence

from ..errors import BooError
from ..results import DONE, FINAL_STATUSES, IREE, TORCH, JobResult
from .common import job_succeeded

PROG = "boo-driver"

# iree-boo-driver's backend names, mapped to what each means here.
BACKENDS = {
    "iree": IREE, "iree_boo": IREE, "iree_boo_experimental": IREE, "iree_boo_legacy": IREE,
    "torch": TORCH, "pytorch": TORCH,
    # ours: each kernel in the best known configuration for this machine, beside BOO's (the `best` column)
    "best": IREE,
}
#: the backend name of the best column
BEST_BACKEND = "best"


def measure_and_print(session, files, command, names, verbose, rows, stops, *, numerics_verbose=False) -> bool:
    """Measure, then print every command's lines; True when some job failed."""
    entries: list[tuple[str, list[JobResult]]] = []
    extra = command if files else []
    if files:
        for f in files:
            entries += session.add_file(f, extra)
    else:
        entries.append((" ".join(command), session.add_command(command)))
    if session.driver_flags_note:   # once per run, however many lines carry such flags
        print(f"{PROG}: note: {session.driver_flags_note}", file=sys.stderr)
    stops.raising = False
    try:
        session.start()
    except BooError:
        if session.failure is None:   # (a store that takes no writes is reported once, after the CSV)
            raise
    printed = 0   # each command's lines as soon as its jobs are final, in the commands' order (iree-boo-driver's)
    failed = False
    while True:
        idle = session.wait(timeout=0.2)
        stopping = stops.event.is_set()
        if stopping:
            session.interrupt()
        while printed < len(entries) and (idle or stopping or all(j.status in FINAL_STATUSES
                                                                  for j in entries[printed][1])):
            if printed == 0 and session.compile_stage.untrusted_note:   # once per run
                print(f"{PROG}: warning: {session.compile_stage.untrusted_note}", file=sys.stderr)
            failed = _print_entry(*entries[printed], names, verbose, rows, numerics_verbose) or failed
            printed += 1
        if idle or stopping:
            break
    return failed or session.failure is not None


def _print_entry(text: str, jobs: list[JobResult], names, verbose, rows, numerics_verbose) -> bool:
    """One command's lines (flushed: a redirected run shows its progress); True when a job of it failed."""
    by_backend: dict[str, JobResult] = {}
    failed = False
    print(text)
    for job in jobs:
        if job.backend not in BACKENDS.values():  # a line that did not parse: it fails on every backend
            by_backend = {n: job for n in names}
            print(f">>> FAILED: {job.error}")
            failed = True
            continue
        name = _backend_name(names, job)
        by_backend[name] = job
        print(_line(name, job, len(names) > 1 or verbose))
        if (short := _short_of_iter(job, text)) is not None:
            print(f"{PROG}: note: {job.func_name} [{name}]: {short}", file=sys.stderr)
        failed = failed or not job_succeeded(job)
        if job.numerics is not None:   # as BOO prints its verdict per command
            print(_numerics_line(job.numerics))
            if numerics_verbose:
                print("\n".join(_numerics_details(job.numerics)))
    rows.append((text, by_backend))
    sys.stdout.flush()
    return failed


def _short_of_iter(job: JobResult, text: str) -> str | None:
    """Why a done job has fewer samples than its command line `text`'s --iter asked, or None: the time limit came
    first (a 7 s bf16 mm has 8 samples in 60 s), or samples that lost their core to another process were left out
    of the statistics."""
    if job.status != DONE or job.stats is None:
        return None
    try:
        from ..commands import parse_invocation

        asked = parse_invocation(text).iters
    except (BooError, ValueError):
        return None
    taken = len(job.samples_us)
    if taken < asked:
        return (f"{taken} of the {asked} samples --iter asked: the job's time limit (--max-time, default 60 s) "
                f"came first")
    if job.stats.n < asked:
        return (f"{job.stats.n} of its {taken} samples are in the statistics: the others lost their core to "
                f"another process")
    return None


def _backend_name(names: Sequence[str], job: JobResult) -> str:
    """The --backend name a job answers: `best` for the best column, else the name of its backend."""
    if job.variant == BEST_BACKEND:
        return BEST_BACKEND
    return next(n for n in names if BACKENDS[n] == job.backend and n != BEST_BACKEND)


def _line(name: str, job: JobResult, show_backend: bool) -> str:
    who = f"{name}: " if show_backend else ""
    if job.status == DONE and job.stats is not None:
        s = job.stats
        text = (f">>> {who}min={s.min_us:.2f}us max={s.max_us:.2f}us mean={s.mean_us:.2f}us "
                f"stddev={s.stddev_us:.2f}us median={s.median_us:.2f}us n={s.n}")
        if job.device_us is not None:   # GPU: the dispatches' own device time, as iree-boo-driver reports it
            text += f" dispatch={job.device_us:.2f}us"
        if job.compile is not None and job.compile.num_dispatches is not None:
            text += f" num_dispatches={job.compile.num_dispatches}"
        if job.numerics is not None:
            text += f" numerics={job.numerics.verdict}"
        if job.error:
            text += f" ({job.error})"
        return text
    if job.status in ("interrupted", "cancelled"):
        return f">>> {who}{job.status.upper()}"
    return f">>> {who}FAILED: {job.error or job.status}"


def _numerics_line(info) -> str:
    if info.verdict == "pass":
        return "Numerics: PASS"
    return f"Numerics: FAIL ({info.stats.get('reason') or 'unknown'})"


def _numerics_details(info) -> list[str]:
    """--numerics-verbose: every output's error statistics, the structured test and the criteria."""
    lines = []
    for o in info.stats.get("outputs", []):
        if "n" not in o:
            lines.append(f"  output {o.get('index')}: shape mismatch")
            continue
        lines.append(f"  output {o['index']} {o['shape']} {o['dtype']} n={o['n']}: vs reference mean "
                     f"{o['mean_err']:.6e} stddev {o['std_err']:.6e} max {o['max_abs_err']:.6e}; "
                     f"torch vs reference stddev {o['torch_std_err']:.6e}; vs torch max {o['vs_torch_max_abs']:.6e}")
    structured = info.stats.get("structured")
    if isinstance(structured, dict):
        lines.append(f"  structured test: {'PASS' if structured.get('pass') else 'FAIL'}")
    lines.append(f"  criteria: {info.stats.get('criteria')} ({info.stats.get('seeds', 1)} seed(s), reference "
                 f"{info.stats.get('reference')})")
    return lines
