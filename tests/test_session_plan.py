"""session.plan: inputs -> jobs, without compiling or measuring anything (runs in well under a second)."""
from __future__ import annotations

import hashlib
from pathlib import Path

from boo_engine.commands import parse_invocation, read_commands_file
from boo_engine.results import FAILED, IREE, QUEUED, TORCH, JobResult
from boo_engine.session.plan import InputEntry, Plan, job_id
from boo_engine.variants import BASELINE, Variant

GEMM = "gemm -k 16 -m 32 -n 16"
CONV = "conv -n 2 -c 8 -H 16 -W 16 -k 8 -y 1 -x 1 --iter 7"
O1 = Variant(name="o1", flags=("--iree-opt-level=O1",))


def entry(text: str) -> InputEntry:
    return InputEntry.from_command(parse_invocation(text.split()))


def old_formula(text: str, variant: str, backend: str, target: str) -> str:
    """The id formula every stored run used: `--resume` finds finished jobs by it."""
    return hashlib.sha1(f"{text}\0{variant}\0{backend}\0{target}".encode()).hexdigest()[:12]


def test_job_ids_are_stable_across_versions():
    # pinned values: a change to the formula (even one applied to both sides of a comparison) breaks --resume
    assert job_id(GEMM, "baseline", IREE, "cpu") == "f368b57536c3"
    assert job_id(GEMM, "baseline", TORCH, "cpu") == "a3c359a9f31b"
    assert job_id(GEMM, "o1", IREE, "cpu") == "4bcb5168ed5d"
    assert job_id(GEMM, "o1", IREE, "hip:gfx942") == old_formula(GEMM, "o1", "iree", "hip:gfx942")


def test_a_repeated_command_gets_numbered_ids():
    plan = Plan("cpu", (IREE,))
    first, second, third = (plan.add_entry(entry(GEMM), [BASELINE])[0] for _ in range(3))
    base = old_formula(GEMM, "baseline", "iree", "cpu")
    assert [first.job_id, second.job_id, third.job_id] == [base, f"{base}-2", f"{base}-3"]


def test_entries_x_variants_x_backends():
    plan = Plan("cpu", (IREE, TORCH))
    gemm = plan.add_entry(entry(GEMM), [BASELINE, O1])
    conv = plan.add_entry(entry(CONV), [BASELINE, O1])
    # every variant on IREE, then one torch reference (torch has no variants)
    assert [(r.variant, r.backend) for r in gemm] == [("baseline", "iree"), ("o1", "iree"), ("baseline", "torch")]
    assert [r.job_id for r in gemm] == [old_formula(GEMM, v, b, "cpu") for v, b in
                                        [("baseline", "iree"), ("o1", "iree"), ("baseline", "torch")]]
    assert all(r.status == QUEUED and r.target == "cpu" for r in gemm + conv)
    assert list(plan.jobs) == [r.job_id for r in gemm + conv]
    # the command text is what jobs are named by: timing args stripped
    assert {r.command for r in conv} == {"conv -n 2 -c 8 -H 16 -W 16 -k 8 -y 1 -x 1"}
    assert plan.planned[gemm[0].job_id].iters == 100 and plan.planned[conv[0].job_id].iters == 7
    assert plan.planned[gemm[2].job_id].backend == TORCH and plan.planned[gemm[1].job_id].variant is O1

    only_iree = Plan("cpu", (IREE,), iters=5)
    jobs = only_iree.add_entry(entry(CONV), [BASELINE, O1])
    assert [r.backend for r in jobs] == ["iree", "iree"]
    assert all(only_iree.planned[r.job_id].iters == 5 for r in jobs)   # a session-wide --iter wins


def test_a_bad_line_becomes_one_failed_job(tmp_path: Path):
    path = tmp_path / "cmds.txt"
    path.write_text(f"{GEMM}\n# a comment\ngemm --bogus 3\n")
    plan = Plan("cpu", (IREE, TORCH))
    lines = read_commands_file(path, errors="collect")
    good, bad = (plan.add_entry(InputEntry.from_line(line), [BASELINE, O1]) for line in lines)
    assert len(good) == 3 and all(r.source == f"{path}:1" for r in good)
    (failed,) = bad
    assert failed.status == FAILED and failed.variant == "-" and failed.backend == "-"
    assert failed.error is not None and failed.error.startswith(f"{path}:3: ") and "--bogus" in failed.error
    assert failed.job_id == old_formula("gemm --bogus 3", "-", "-", "cpu")
    assert failed.op == "gemm" and failed.source == f"{path}:3"
    assert plan.planned[failed.job_id].command is None


def test_edited_dispatch_variants_only_get_jobs_for_their_kernel():
    gemm_func = parse_invocation(GEMM.split()).signature.func_name
    edited = Variant(name="edited", flags=("--iree-opt-level=O1",), kernels=(gemm_func,))
    plan = Plan("cpu", (IREE, TORCH))
    gemm = plan.add_entry(entry(GEMM), [BASELINE, edited])
    conv = plan.add_entry(entry(CONV), [BASELINE, edited])
    assert [r.variant for r in gemm] == ["baseline", "edited", "baseline"]
    assert [r.variant for r in conv] == ["baseline", "baseline"]

    # a variant added later: one IREE job per good entry it applies to, none for torch or bad lines
    plan.add_entry(InputEntry(source="f:1", text="nonsense", command=None, error="f:1: unknown op"), [BASELINE])
    added = plan.add_variant(Variant(name="late", flags=("-O2",), kernels=(gemm_func,)))
    assert [(r.command, r.variant, r.backend) for r in added] == [(GEMM, "late", "iree")]
    assert Plan("cpu", (TORCH,)).add_variant(O1) == []


def test_resumed_results_are_reused_and_requeue_resets():
    plan = Plan("cpu", (IREE,))
    done = JobResult(job_id=old_formula(GEMM, "baseline", "iree", "cpu"), command=GEMM, func_name="f", op="gemm",
                     variant="baseline", target="cpu", backend="iree", status="done", samples_us=[1.0, 2.0])
    plan.resumed = {done.job_id: done}
    (result,) = plan.add_entry(entry(GEMM), [BASELINE])
    assert result is done
    plan.planned[result.job_id].cancelled = True
    plan.requeue(result.job_id)
    assert result.status == QUEUED and not result.samples_us and not plan.planned[result.job_id].cancelled
