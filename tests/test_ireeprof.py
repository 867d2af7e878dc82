"""Dispatch time from IREE's own HAL profiler (bench/ireeprof.py): a real capture on the CPU of a real compiled
gemm, read back by the real iree-profile; the mode the CPU refuses; how events become per-call times (hand-written
JSONL, GPU-style records included); and the worker asking for it with device_timing on the CPU.

A refusal is remembered (IREE 3.13's CUDA driver refuses every profiling mode: the GPU check, H100).
No timing bounds beyond what must hold on any host: a call's dispatches run inside that call, so their time fits
in the wall time iree-benchmark-module reports for the calls."""
from __future__ import annotations

import json

import pytest
from worker_kernels import MatmulSig, compile_sig

from boo_engine.bench import ireeprof
from boo_engine.bench.ireeprof import (
    DEVICE_MODE,
    HOST_MODE,
    IreeProfileError,
    capture,
    parse_events,
    profile,
    profile_argv,
    profiling_mode,
    read_events,
    summarize,
    tool_error,
)
from boo_engine.bench.reproducer import write_reproducer
from boo_engine.bench.worker import BenchSpec, BenchWorker
from boo_engine.iree_tools import find_runtime_tool

pytestmark = pytest.mark.timeout(300)

needs_tools = pytest.mark.skipif(
    not (find_runtime_tool("iree-benchmark-module") and find_runtime_tool("iree-profile")),
    reason="iree-base-runtime's iree-benchmark-module / iree-profile not installed")

SIG = MatmulSig(n=128)
KEY = "main$async_dispatch_0_matmul_128x128x128_f32"


@pytest.fixture(scope="module")
def art(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ireeprof_art")
    vmfb = compile_sig(SIG, str(folder))
    return folder, vmfb


@pytest.fixture(scope="module")
def reproducer(art):
    folder, vmfb = art
    return write_reproducer(str(folder), SIG, seed=0, driver="local-sync", threads=1, vmfb_path=vmfb)


# ---- a real capture on the CPU ------------------------------------------------------------------------------

@needs_tools
def test_cpu_capture_has_one_host_timed_dispatch_per_call(reproducer, tmp_path):
    cap = capture(reproducer, str(tmp_path), calls=6)
    assert cap.mode == HOST_MODE and cap.calls == 6 and cap.seconds > 0
    assert cap.wall_us is not None and cap.wall_us > 0
    events = read_events(cap.path)
    assert len(events) == 6                                           # one gemm dispatch per call, each call seen
    assert {e["type"] for e in events} == {"host_dispatch_event"}
    assert {e["timing_source"] for e in events} == {"host_execution_event"}
    assert {e["key"] for e in events} == {KEY}
    assert all(e["valid"] and e["duration_ns"] > 0 for e in events)
    assert len({e["submission_id"] for e in events}) == 6            # a call is one submission
    # each call's dispatch runs inside that call: together they fit in the calls' wall time
    assert sum(e["duration_ns"] for e in events) / 1e3 < cap.wall_us * cap.calls

    s = summarize(events)
    assert s["calls"] == 5 and s["dropped_calls"] == 1                # the first call is left out
    assert s["dispatches"] == 1 and list(s["per_dispatch_us"]) == [KEY]
    assert 0 < s["device_us"] < cap.wall_us * cap.calls
    assert s["source"] == "iree-profile" and s["event_type"] == "host_dispatch_event"
    assert s["timing_source"] == "host_execution_event" and s["invalid_events"] == 0


@needs_tools
def test_profile_captures_reads_and_summarizes(reproducer, tmp_path):
    s = profile(reproducer, str(tmp_path), calls=4)
    assert "error" not in s, s
    assert s["calls"] == 4 and s["dispatches"] == 1 and s["device_us"] > 0
    assert s["mode"] == HOST_MODE and s["source"] == "iree-profile" and s["capture_s"] > 0
    assert 0 < s["device_us"] < s["wall_us"] * 5       # 5 calls ran (the first dropped): the median call fits
    json.dumps(s)                                                             # stored as the result's detail


@needs_tools
def test_dispatch_events_mode_is_refused_on_the_cpu_in_one_line(reproducer, tmp_path, monkeypatch):
    with pytest.raises(IreeProfileError) as e:
        capture(reproducer, str(tmp_path), calls=2, mode=DEVICE_MODE)
    msg = str(e.value)
    assert "\n" not in msg and "Traceback" not in msg
    assert "UNIMPLEMENTED" in msg and "dispatch-events" in msg and "profile.c" not in msg
    monkeypatch.setattr(ireeprof, "_refused", {})
    got = profile(reproducer, str(tmp_path), calls=2, mode=DEVICE_MODE)
    assert set(got) == {"error", "source"} and "UNIMPLEMENTED" in got["error"] and "\n" not in got["error"]
    # the refusal is the runtime's, not the kernel's: not tried again in this process (on a GPU each try costs a
    # process start and a device init); other modes still are
    calls = []
    monkeypatch.setattr(ireeprof, "capture", lambda *a, **k: calls.append(a) or pytest.fail("tried again"))
    again = profile(reproducer, str(tmp_path), calls=2, mode=DEVICE_MODE)
    assert again["error"].startswith(got["error"]) and "not tried again" in again["error"] and not calls
    monkeypatch.undo()
    assert "error" not in profile(reproducer, str(tmp_path), calls=2)


@needs_tools
def test_a_missing_module_fails_in_one_line(art, tmp_path):
    folder, vmfb = art
    cmd = f"iree-benchmark-module --module={tmp_path}/nope.vmfb --device=local-sync --function=main"
    got = profile(cmd, str(tmp_path), calls=2)
    assert "error" in got and "\n" not in got["error"] and "iree-benchmark-module failed" in got["error"]


# ---- the command, the mode, the error line: pure ------------------------------------------------------------

def test_profile_argv_replaces_the_reproducers_timing_flags():
    cmd = ("iree-benchmark-module --module=/a/k.vmfb --device=hip --function=main --input=@/a/x.npy "
           "--benchmark_repetitions=10 --benchmark_min_time=0.1s")
    argv = profile_argv(cmd, "/t/p.ireeprof", 21, tool="/wheel/iree-benchmark-module")
    assert argv[0] == "/wheel/iree-benchmark-module"
    assert argv[1:5] == ["--module=/a/k.vmfb", "--device=hip", "--function=main", "--input=@/a/x.npy"]
    assert "--benchmark_repetitions=10" not in argv and "--benchmark_min_time=0.1s" not in argv
    assert argv[5:] == ["--benchmark_repetitions=1", "--benchmark_min_time=21x", "--benchmark_format=json",
                        "--device_profiling_mode=dispatch-events", "--device_profiling_output=/t/p.ireeprof"]
    cpu = profile_argv(["/own/iree-benchmark-module", "--device=local-task"], "/t/p", 3, tool="/wheel/x")
    assert cpu[0] == "/own/iree-benchmark-module"                   # a path given stays
    assert f"--device_profiling_mode={HOST_MODE}" in cpu
    with pytest.raises(IreeProfileError):
        profile_argv("", "/t/p", 3)


def test_profiling_mode_per_driver():
    assert profiling_mode("cuda") == profiling_mode("hip") == profiling_mode("hip://0") == DEVICE_MODE
    assert profiling_mode("local-sync") == profiling_mode("local-task") == HOST_MODE


def test_tool_error_is_the_iree_status_line():
    err = ("2026-01-01T00:00:00+00:00\nRunning iree-benchmark-module\n"
           "c/runtime/src/iree/hal/local/profile.c:240: UNIMPLEMENTED; unsupported local profiling data families 0x8\n")
    assert tool_error(err) == "UNIMPLEMENTED; unsupported local profiling data families 0x8"
    assert tool_error("first\nlast line\n") == "last line"
    assert tool_error("", "only stdout\n") == "only stdout"
    assert tool_error("") == "no output"
    assert len(tool_error("x" * 10_000)) <= 200


# ---- how events become per-call times: hand-written JSONL ---------------------------------------------------

def _gpu(event_id: int, sub: int, key: str, ns: int, **kw) -> str:
    row = {"type": "dispatch_event", "event_id": event_id, "submission_id": sub, "command_buffer_id": 1,
           "command_index": event_id % 2, "executable_id": 1, "function_ordinal": 0, "key": key,
           "start_tick": 1000 * event_id, "end_tick": 1000 * event_id + ns, "duration_ns": ns, "valid": True}
    row.update(kw)
    return json.dumps(row)


GPU_JSONL = "\n".join([
    "iree-profile: some banner that is not JSON",
    _gpu(1, 1, "main$async_dispatch_0_a", 90_000), _gpu(2, 1, "main$async_dispatch_1_b", 50_000),  # first: dropped
    _gpu(3, 2, "main$async_dispatch_0_a", 10_000), _gpu(4, 2, "main$async_dispatch_1_b", 4_000),   # 14 us
    _gpu(5, 3, "main$async_dispatch_0_a", 12_000), _gpu(6, 3, "main$async_dispatch_1_b", 5_000),   # 17 us
    _gpu(7, 4, "main$async_dispatch_0_a", 11_000), _gpu(8, 4, "main$async_dispatch_1_b", 6_000),   # 17 us
    _gpu(9, 4, "main$async_dispatch_1_b", 999_000, valid=False),                 # an invalid timestamp: skipped
    "{not json",
    json.dumps(["a", "list"]),
    json.dumps({"type": "dispatch_summary", "total_dispatches": 9, "valid_dispatches": 8}),
])


def test_summarize_gpu_style_events_per_submission_first_call_dropped():
    events = parse_events(GPU_JSONL.splitlines())
    assert len(events) == 9 and all(e["type"] == "dispatch_event" for e in events)
    s = summarize(events)
    assert s["calls"] == 3 and s["dropped_calls"] == 1 and s["invalid_events"] == 1
    assert s["device_us"] == 17.0 and s["dispatches"] == 2
    assert s["per_dispatch_us"] == {"main$async_dispatch_0_a": 11.0, "main$async_dispatch_1_b": 5.0}
    assert s["source"] == "iree-profile" and s["event_type"] == "dispatch_event"
    assert s["timing_source"] == "dispatch_event"              # no timing_source field: the type says which
    assert summarize(events, dropped_calls=0)["calls"] == 4


def test_summarize_prefers_device_timestamps_over_host_events_beside_them():
    host = {"type": "host_dispatch_event", "timing_source": "host_execution_event", "submission_id": 7,
            "key": "k", "duration_ns": 500_000, "valid": True}
    events = parse_events(GPU_JSONL.splitlines()) + [host, {**host, "submission_id": 8}]
    s = summarize(events)
    assert s["event_type"] == "dispatch_event" and s["host_events_ignored"] == 2 and s["device_us"] == 17.0


def test_summarize_without_duration_ns_uses_start_and_end_in_ns():
    rows = [{"type": "dispatch_event", "submission_id": i, "key": "k", "start_device_ns": 100, "end_device_ns": 130}
            for i in range(3)]
    rows.append({"type": "dispatch_event", "submission_id": 9, "key": "k", "start_tick": 1, "end_tick": 2})  # ticks
    s = summarize(rows)
    assert s["calls"] == 2 and s["device_us"] == 0.03 and s["invalid_events"] == 1


def test_summarize_without_usable_events_is_an_error():
    assert "error" in summarize([])
    assert "no valid" in summarize(parse_events([_gpu(1, 1, "k", 10, valid=False)]))["error"]
    one_call = summarize(parse_events([_gpu(1, 1, "k", 10), _gpu(2, 1, "k2", 10)]))
    assert "error" in one_call and "device_us" not in one_call        # the only call is the dropped first one
    no_submission = summarize([{"type": "dispatch_event", "key": "k", "duration_ns": 10}])
    assert "error" in no_submission
    assert all("\n" not in summarize(e)["error"] for e in ([], [{"type": "x_dispatch_event"}]))


# ---- the worker: device_timing on the CPU -------------------------------------------------------------------

@pytest.fixture(scope="module")
def worker():
    w = BenchWorker()
    yield w
    w.close()


@needs_tools
def test_worker_device_time_on_the_cpu_comes_from_iree_profile(worker, art):
    _, vmfb = art
    out = worker.run(BenchSpec(job_id="p", backend="iree", sig=SIG, vmfb_path=vmfb, iters=10, warmup_s=0.02,
                               device_timing=True))
    d = out.device_detail["dispatch"]
    assert "error" not in d, d
    assert d["source"] == "iree-profile" and d["event_type"] == "host_dispatch_event"
    assert d["mode"] == HOST_MODE and d["dispatches"] == 1 and d["calls"] >= 3
    assert list(d["per_dispatch_us"]) == [KEY]
    assert out.device_us == d["device_us"] and out.device_us > 0
    json.dumps(out.device_detail)

    # without device_timing: no profile, no device time (what a CPU session asks today)
    plain = worker.run(BenchSpec(job_id="q", backend="iree", sig=SIG, vmfb_path=vmfb, iters=5, warmup_s=0.02))
    assert plain.device_us is None and plain.device_detail is None


@needs_tools
def test_worker_cold_caches_say_why_iree_profile_was_not_used(worker, art):
    _, vmfb = art
    out = worker.run(BenchSpec(job_id="c", backend="iree", sig=SIG, vmfb_path=vmfb, iters=3, warmup_s=0.0,
                               cache_mode="cold", device_timing=True))
    d = out.device_detail["dispatch"]
    assert out.device_us is None and "cold" in d["iree_profile_error"] and "\n" not in d["error"]
    assert "flush" in out.device_detail


def test_worker_torch_on_the_cpu_is_unchanged_by_device_timing(worker):
    out = worker.run(BenchSpec(job_id="t", backend="torch", sig=SIG, iters=5, warmup_s=0.02, device_timing=True))
    assert out.device_us is None and out.device_detail is None


def test_capture_without_the_tool_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(ireeprof, "find_runtime_tool", lambda name: None)
    got = profile("iree-benchmark-module --device=local-sync", str(tmp_path), calls=2)
    assert got["error"] == "iree-benchmark-module not found: install iree-base-runtime"


def test_a_refused_device_is_not_asked_again_before_any_input_is_written(monkeypatch, tmp_path):
    """On the H200 every IREE job wrote its reproducer's inputs (tens of MB for a 4096^3 gemm) only for the
    profiler to say again that CUDA refuses it: a refusal known in this process is answered first."""
    from boo_engine.bench import dispatch_time, reproducer
    from boo_engine.targets import runtime_driver

    device = runtime_driver("local-sync", 1)
    monkeypatch.setattr(ireeprof, "_refused", {(device, ireeprof.profiling_mode(device)): "UNIMPLEMENTED; no"})
    monkeypatch.setattr(reproducer, "write_reproducer", lambda *a, **k: pytest.fail("inputs written"))
    spec = BenchSpec("j", "iree", MatmulSig(8), vmfb_path=str(tmp_path / "k.vmfb"), device_timing=True)
    got = dispatch_time.iree_profile(spec, [10.0])
    assert got["error"].startswith("UNIMPLEMENTED; no") and "not tried again" in got["error"]
    assert ireeprof.refusal(device) == "UNIMPLEMENTED; no" and ireeprof.refusal("cuda") is None
