"""The benchmark worker process: real kernels measured in a real child, and its failure paths (a kernel that
raises, a corrupt artifact, a child killed by SIGSEGV, a hang past the timeout, cancel), each followed by a job
that must succeed on the (replaced) worker."""
from __future__ import annotations

import dataclasses
import statistics
import threading
import time

import pytest
import torch
from worker_kernels import CrashSig, HangSig, MatmulSig, RaiseSig, compile_sig, stale_answers_child

from boo_engine.bench import worker as worker_module
from boo_engine.bench.worker import BenchCancelled, BenchFailed, BenchSpec, BenchWorker, default_timeout_s
from boo_engine.errors import BooError

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def vmfb(tmp_path_factory):
    out = tmp_path_factory.mktemp("worker_kernels")
    return {n: compile_sig(MatmulSig(n=n), str(out)) for n in (32, 128)}


@pytest.fixture(scope="module")
def worker():
    w = BenchWorker()
    yield w
    w.close()


def _spec(**kw) -> BenchSpec:
    base = dict(job_id="t", backend="iree", sig=MatmulSig(n=32), iters=50, warmup_s=0.02)
    base.update(kw)
    return BenchSpec(**base)


def _ok(worker: BenchWorker, vmfb) -> None:
    """A plain job works on this worker."""
    out = worker.run(_spec(vmfb_path=vmfb[32], iters=10))
    assert len(out.samples_us) == 10


def test_iree_and_torch_backends_stream_every_sample(worker, vmfb):
    for backend in ("iree", "torch"):
        got: list[list[float]] = []
        out = worker.run(_spec(backend=backend, sig=MatmulSig(n=128), vmfb_path=vmfb[128], iters=20,
                               min_time_s=0.5), on_samples=got.append)
        assert len(out.samples_us) >= 20
        assert [s for b in got for s in b] == out.samples_us
        assert len(got) >= 3                          # streamed while measuring, not only at the end
        assert out.warmup_calls >= 3 and out.block_k >= 1
        assert out.host_load is not None
        assert 1.0 < statistics.median(out.samples_us) < 50_000
        assert out.driver == ("local-sync" if backend == "iree" else None)


def test_outputs_saved_match_torch(worker, vmfb, tmp_path):
    path = str(tmp_path / "out.pt")
    out = worker.run(_spec(sig=MatmulSig(n=128), vmfb_path=vmfb[128], iters=5, save_outputs_to=path))
    assert out.outputs_path == path
    (c,) = torch.load(path)
    a, b = MatmulSig(n=128).get_sample_args(0)
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)


def test_numerics_verdict_in_the_worker(worker, vmfb, tmp_path):
    pytest.importorskip("boo_engine.numerics")
    out = worker.run(_spec(sig=MatmulSig(n=128), vmfb_path=vmfb[128], iters=5, verify_numerics=True))
    assert out.numerics is not None and out.numerics.verdict == "pass", out.numerics
    # against saved outputs that are wrong, the same kernel must fail
    bad = str(tmp_path / "bad.pt")
    torch.save([torch.zeros(128, 128)], bad)
    out = worker.run(_spec(sig=MatmulSig(n=128), vmfb_path=vmfb[128], iters=5, verify_numerics=True,
                           compare_outputs_with=bad))
    assert out.numerics.verdict == "fail"


def test_kernel_that_raises_is_a_failed_result_and_the_worker_survives(worker, vmfb):
    pid = worker.pid
    with pytest.raises(BenchFailed, match="ValueError: boom from the kernel"):
        worker.run(_spec(backend="torch", sig=RaiseSig(n=8)))
    assert worker.pid == pid
    _ok(worker, vmfb)


def test_corrupt_artifact_fails_cleanly(worker, vmfb, tmp_path):
    bad = tmp_path / "corrupt.vmfb"
    data = open(vmfb[32], "rb").read()
    bad.write_bytes(data[: len(data) // 3])
    with pytest.raises(BenchFailed) as info:
        worker.run(_spec(vmfb_path=str(bad)))
    assert "\n" not in str(info.value)
    _ok(worker, vmfb)


def test_bad_spec_is_rejected_with_one_line():
    w = BenchWorker(start=False)
    for spec, words in ((_spec(backend="cuda-graph"), "unknown backend"), (_spec(vmfb_path=None), "vmfb_path"),
                        (_spec(vmfb_path="/nonexistent/x.vmfb"), "no such artifact")):
        with pytest.raises(BooError, match=words):
            w.run(spec)
    assert w.pid is None       # rejected before any process was started


def test_crash_is_isolated_and_the_worker_replaced(worker, vmfb):
    pid = worker.pid
    with pytest.raises(BenchFailed, match="worker died with SIGSEGV"):
        worker.run(_spec(backend="torch", sig=CrashSig(n=8)))
    _ok(worker, vmfb)
    assert worker.pid != pid


def test_hang_is_killed_at_the_timeout_and_the_worker_replaced(worker, vmfb):
    pid = worker.pid
    t0 = time.monotonic()
    with pytest.raises(BenchFailed, match="timed out after 2 s"):
        worker.run(_spec(backend="torch", sig=HangSig(n=8), timeout_s=2))
    assert time.monotonic() - t0 < 10
    _ok(worker, vmfb)
    assert worker.pid != pid


def test_cancel_is_quick_and_keeps_the_worker(worker, vmfb):
    ev = threading.Event()
    first: list[float] = []

    def on_samples(_):
        if not first:
            first.append(time.monotonic())
            ev.set()

    pid = worker.pid
    with pytest.raises(BenchCancelled):
        worker.run(_spec(sig=MatmulSig(n=128), vmfb_path=vmfb[128], iters=10**8, min_time_s=60),
                   on_samples=on_samples, cancel=ev)
    assert time.monotonic() - first[0] < 1.0
    assert worker.pid == pid                  # stopped by itself between samples: no kill needed
    _ok(worker, vmfb)


def test_cancel_of_a_call_that_never_returns_kills_it(worker, vmfb):
    ev = threading.Event()
    threading.Timer(1.0, ev.set).start()
    t0 = time.monotonic()
    with pytest.raises(BenchCancelled):
        worker.run(_spec(backend="torch", sig=HangSig(n=8), timeout_s=60), cancel=ev)
    assert time.monotonic() - t0 < 2.5
    _ok(worker, vmfb)


def test_threads_use_local_task_and_calls_are_synchronous(worker, vmfb):
    """local-task runs the kernel on worker threads: the invoke must still return only when it is done, so a
    2-thread sample cannot be much shorter than half the 1-thread one (an asynchronous return would be ~10 us)."""
    spec = _spec(vmfb_path=vmfb[128], sig=MatmulSig(n=128), iters=30)
    one = statistics.median(worker.run(spec).samples_us)
    with BenchWorker(threads=2) as w:
        out = w.run(dataclasses.replace(spec, threads=2))
        assert out.driver == "local-task" and out.threads == 2
        assert len(out.samples_us) == 30
        assert statistics.median(out.samples_us) > 0.35 * one, (statistics.median(out.samples_us), one)


def test_messages_of_an_earlier_job_are_ignored(monkeypatch):
    """Samples, failure, cancel and outcome of the previous seq (late answers) must not reach this job."""
    monkeypatch.setattr(worker_module, "_child_main", stale_answers_child)
    got: list[list[float]] = []
    with BenchWorker() as w:
        out = w.run(_spec(backend="torch"), on_samples=got.append)
    assert out.samples_us == [1.0, 2.0] and got == [[1.0, 2.0]]


def test_default_timeout_is_generous():
    assert default_timeout_s(_spec(max_time_s=60)) >= 120
    assert default_timeout_s(_spec(max_time_s=None, iters=100)) >= 100
