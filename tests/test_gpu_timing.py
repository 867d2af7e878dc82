"""GPU timing records that need no GPU: how the profiler's records become per-call dispatch times, and the GPU
monitor's summary and throttle flag (bench/gpu_timing.py). The measurements themselves: tests/test_gpu.py."""
from __future__ import annotations

from boo_engine.bench.gpu_timing import THROTTLE_BITS, GpuMonitor

# ---- runs everywhere: how the profiler's records become per-call dispatch times -----------------------------

def test_dispatch_time_per_call_from_profiler_records():
    from boo_engine.bench.gpu_timing import _MARK, summarize_dispatches

    ranges = [(0.0, 100.0), (200.0, 300.0), (400.0, 500.0)]
    activities = [
        ("main_dispatch_0", 10.0, 30.0), ("main_dispatch_1", 35.0, 40.0),    # call 1: 25 us
        (_MARK, 10.0, 95.0),                                                # our range on the GPU timeline: not a kernel
        ("main_dispatch_0", 210.0, 232.0), ("main_dispatch_1", 240.0, 246.0),  # call 2: 28 us
        ("main_dispatch_0", 410.0, 431.0), ("main_dispatch_1", 440.0, 444.0),  # call 3: 25 us
        ("Memset (Device)", 150.0, 160.0),                                  # between calls: the flush, not counted
    ]
    out = summarize_dispatches(ranges, activities)
    assert out["device_us"] == 25.0 and out["dispatches"] == 2 and out["calls"] == 3
    assert out["per_dispatch_us"] == {"main_dispatch_0": 21.0, "main_dispatch_1": 5.0}
    assert "error" in summarize_dispatches(ranges, [("k", 120.0, 130.0)])



def test_gpu_state_flags_throttle_reasons_but_not_idle():
    m = GpuMonitor()
    m.before = {"sm_mhz": 1980.0, "temp_c": 40.0, "power_w": 100.0, "reasons": 0x1}     # idle: not throttling
    m._polls = [{"sm_mhz": 1755.0, "temp_c": 85.0, "power_w": 700.0, "reasons": 0x4 | 0x20}]
    m.after = {"sm_mhz": 1980.0, "temp_c": 60.0, "power_w": 300.0, "reasons": 0x0}
    s = m.summary()
    assert s["sm_mhz_min"] == 1755.0 and s["temp_c_max"] == 85.0 and s["power_w_max"] == 700.0
    assert s["throttle_reasons"] == sorted([THROTTLE_BITS[0x4], THROTTLE_BITS[0x20]])
    assert abs(s["throttled_share"] - 1 / 3) < 1e-9
    m2 = GpuMonitor()
    m2.before = m2.after = {"sm_mhz": 1980.0, "temp_c": 40.0, "power_w": 100.0, "reasons": 0x1 | 0x2}
    assert m2.summary()["throttled_share"] == 0


def test_monitor_without_a_gpu_records_nothing_and_never_raises():
    with GpuMonitor(interval_s=0.01) as m:
        pass
    assert m.summary() is None or m.summary()["polls"] >= 0


def test_a_jobs_gpu_state_covers_every_round():
    """A job measured in rounds is flagged throttled when ANY round was; its recorded state must say so. On an
    H200 the last round's state alone read 'GPU throttled during 0% of the measurement' for a flagged result."""
    from boo_engine.bench.gpu_timing import merge_gpu_state

    def state(sm, watts, share, reasons, polls):
        s = {"sm_mhz": sm, "mem_mhz": 3201.0, "temp_c": 50.0, "power_w": watts, "reasons": 0.0, "t": 1.0}
        return {"before": s, "after": s, "polls": polls, "sm_mhz_min": sm, "sm_mhz_max": 1980.0,
                "temp_c_max": 50.0, "power_w_max": watts, "throttled_share": share,
                "throttle_reasons": reasons, "source": "nvml"}

    first, last = state(1095.0, 700.8, 0.5, ["sw power cap"], 8), state(1980.0, 270.6, 0.0, [], 8)
    merged = merge_gpu_state(first, last)
    assert merged["throttle_reasons"] == ["sw power cap"] and merged["throttled_share"] == 0.25
    assert merged["sm_mhz_min"] == 1095.0 and merged["power_w_max"] == 700.8 and merged["polls"] == 16
    assert merged["before"] is first["before"] and merged["after"] is last["after"]
    assert merge_gpu_state(None, last) is last and merge_gpu_state(first, None) is first
