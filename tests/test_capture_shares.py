"""A captured file's weights add up: `boo-tui capture` of a small net of ours (tests/models/weighted_net.py), then
every command of the file measured with eager torch in this process as boo-tui's torch column measures it
(`OpSignature.eager` on the command's sample inputs, `bench.harness.measure`, one thread), the commands
interleaved in rounds. Real torch, the real profiler, the real file reader.

Each share is a command's part of the capture's compute total; the measured share is its calls x time over the
sum of calls x time of every command (a command's time: the least of its rounds' medians). For every command of at
least MIN_SHARE percent they must agree within SHARE_TOLERANCE_PP points and a factor SHARE_FACTOR, and the
compute total must be within TOTAL_RATIO of the measured sum. The bounds were chosen from runs on a busy 2-vCPU
AMD EPYC Zen 4 with and without a CPU burner beside the test (docs/performance.md, "Capture shares"). The header
must also show the recorded passes free of page faults (at most FAULTS_MAX a pass): without allocator.py's steady
heap each pass of this net takes 768 (its three 1 MiB outputs written to fresh pages), which timing alone catches
only now and then. The code before this file (shares of the eager time, no captured times) fails both outright.
"""
from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest
import torch

from boo_engine.bench.harness import measure
from boo_engine.commands import read_commands_file
from boo_tui.cli import main

MODEL = Path(__file__).resolve().parent / "models" / "weighted_net.py"
INPUT = "4x16x32x32"
#: commands below this share (percent of the compute total, measured) are not held to SHARE_TOLERANCE_PP: the
#: profiler adds a few us to every op it records inside a call, a large part of a 60 us kernel's time
MIN_SHARE = 5.0
#: |captured share - measured share|, percentage points, for every command of at least MIN_SHARE. Measured on a busy
#: 2-vCPU Zen 4 (load 8-16, most runs beside 1-3 CPU burners): 2-3 typical; at most 4.2 over 20 runs of this net, 7.1
#: over 53 of its first version (a 64 -> 64 linear, whose recorded time held the profiler's cost of the ops inside it)
SHARE_TOLERANCE_PP = 9.0
#: and captured share / measured share within a factor of this, for the same commands. Measured: 1.3 typical; at
#: most 1.43 over the 20 runs, 1.6 twice with the narrow linear
SHARE_FACTOR = 1.8
#: the capture's compute total over the measured sum of calls x time. Measured: 1.06-1.35 typical, 1.6-1.67 twice
#: (the profiler's few us per recorded op, and a model's ops slowed more than a kernel run in a loop by another
#: process on the core's other hardware thread: the capture is one snapshot, the measurement spans seconds); the
#: eager time the shares were of before: 4-400x the measured sum
TOTAL_RATIO = (0.7, 2.0)
ROUNDS = 5
#: page faults a recorded pass may take (the profiler's and Python's small allocations); 0 in every run measured
FAULTS_MAX = 64


@pytest.fixture(scope="module")
def captured(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("shares") / "net.txt"
    threads = torch.get_num_threads()
    try:   # no --threads: the default is what is tested
        assert main(["capture", f"{MODEL}:make", "--input", INPUT, "-o", str(out)]) == 0
    finally:
        torch.set_num_threads(threads)
    return out


def _header(path: Path) -> str:
    return "\n".join(line for line in path.read_text().splitlines()
                     if line.startswith("#") and not line.startswith("# boo-tui:"))


def test_the_header_says_the_threads_and_what_the_shares_are_of(captured):
    header = _header(captured)
    assert "threads: 1 (measure with the same: boo-tui FILE --threads 1" in header, header
    total_ms = float(re.search(r"compute total: ([0-9.]+) ms a pass", header)[1])
    assert "share = a command's part of the compute total" in header
    faults = int(re.search(r"page faults in a recorded pass: (\d+)", header)[1])
    assert faults <= FAULTS_MAX, f"the recorded passes wrote to fresh memory: {faults} page faults a pass"
    commands = read_commands_file(captured)
    assert commands and all(c.calls and c.captured_us is not None for c in commands)
    # the definition, as written: shares of the sum of every command's captured time, which the header gives
    total_us = sum(c.captured_us for c in commands)
    assert abs(total_us / 1e3 - total_ms) <= 0.001 + 1e-3 * total_ms
    assert abs(sum(c.share for c in commands) - 100.0) <= 0.01 * len(commands)
    for c in commands:
        assert abs(100.0 * c.captured_us / total_us - c.share) <= 0.01, c.text


def _measured_us(commands) -> list[float]:
    """calls x time of each command on its own, one torch thread, the commands interleaved in ROUNDS rounds;
    each the least of its rounds' medians: as the capture takes each call's least over its passes, a round the
    machine slowed (another process on the core's other hardware thread) does not count."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        calls = [c.signature.eager(*c.signature.get_sample_args(seed=0)) for c in commands]
        rounds: list[list[float]] = [[] for _ in commands]
        for _ in range(ROUNDS):
            for i, call in enumerate(calls):
                m = measure(call, iters=20, min_time_s=0.02, warmup_s=0.01)
                rounds[i].append(statistics.median(m.samples_us))
    finally:
        torch.set_num_threads(threads)
    return [c.calls * min(r) for c, r in zip(commands, rounds)]


def test_each_share_is_its_measured_torch_times_share(captured):
    commands = read_commands_file(captured)
    measured = _measured_us(commands)
    captured_total, measured_total = sum(c.captured_us for c in commands), sum(measured)
    table = [f"{'share':>6} {'measured':>8} {'us':>8} {'meas us':>8}  command"]
    table += [f"{c.share:6.2f} {100 * m / measured_total:8.2f} {c.captured_us:8.1f} {m:8.1f}  {c.text[:70]}"
              for c, m in zip(commands, measured)]
    print("\n".join(table))   # shown when it fails
    ratio = captured_total / measured_total
    assert TOTAL_RATIO[0] <= ratio <= TOTAL_RATIO[1], f"compute total {captured_total:.0f} us against the " \
        f"measured {measured_total:.0f} us: {ratio:.2f}x"
    held = [(c, 100.0 * m / measured_total) for c, m in zip(commands, measured)
            if 100.0 * m / measured_total >= MIN_SHARE]
    assert len(held) >= 4, "the net's kernels are big enough to be held to the tolerance"
    off = [(c.text, c.share, round(share, 2)) for c, share in held
           if abs(c.share - share) > SHARE_TOLERANCE_PP or not 1 / SHARE_FACTOR <= c.share / share <= SHARE_FACTOR]
    assert not off, off
