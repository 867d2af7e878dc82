"""`boo-tui capture`: a small model of our own captured forward, forward + backward and channels-last; a trace the
test records itself with torch.profiler imported; the bad inputs answered in one line with exit code 2.

The MIOpenDriver lines are parsed back with the grammar and compared with the signature of the call the model
made; every aten line's four lists are read back with ast.literal_eval."""
from __future__ import annotations

import ast
import json
import re
import textwrap
from pathlib import Path

import pytest
import torch

from boo_engine.capture import NON_COMPUTE, parse_input
from boo_engine.capture.errors import CaptureError
from boo_engine.capture.miopen import dense_layout
from boo_engine.commands import parse_command
from boo_engine.ops.bnorm import BatchNormSignature
from boo_engine.ops.conv import ConvSignature
from boo_engine.ops.gemm import GemmSignature
from boo_tui.cli import main

MODEL = textwrap.dedent('''
    import torch
    import torch.nn.functional as F
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 3, padding=1)                    # conv with bias
            self.bn = nn.BatchNorm2d(8)
            self.body = nn.Conv2d(8, 8, 3, padding=1, bias=False)        # called twice
            self.down = nn.Conv2d(8, 16, 3, stride=2, bias=False)        # stride 2, no padding: 16 -> 7
            self.proj = nn.Linear(16, 32)                                # with bias: an aten::linear line
            self.ln = nn.LayerNorm(32)
            self.head = nn.Linear(32, 12, bias=False)                    # no bias, 2-D: a gemm

        def forward(self, x):
            y = F.relu(self.bn(self.stem(x)))
            y = self.body(self.body(y))
            y = self.down(y)
            z = self.head(F.gelu(self.ln(self.proj(y.mean((2, 3))))))
            q = y.flatten(2).transpose(1, 2)                             # (2, 49, 16) tokens
            attn = torch.bmm(q, q.transpose(1, 2)).softmax(-1)
            return z, torch.matmul(attn, q)


    def make():
        return Net()


    def linear_only():
        return nn.Linear(32, 12, bias=False)


    def plain_norm():
        return nn.Sequential(nn.Linear(16, 16), nn.LayerNorm(16, elementwise_affine=False))


    class Shapes(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv1d(4, 6, 5, stride=2, padding=2, dilation=1)
            self.up = nn.ConvTranspose2d(4, 8, 3, stride=2, padding=1, output_padding=1, groups=2)
            self.c3 = nn.Conv3d(4, 4, (1, 3, 3), padding=(0, 1, 1), dilation=(1, 2, 2), bias=False)

        def forward(self, x1, x2, x3):
            return self.c1(x1), self.up(x2), self.c3(x3)


    def shapes():
        return Shapes()


    def volume():
        return nn.Sequential(nn.Conv3d(4, 8, 3, padding=1, bias=False), nn.ReLU())


    class Flaky(nn.Module):
        calls = 0

        def forward(self, x):
            Flaky.calls += 1
            if Flaky.calls == 3:
                raise ValueError("ran out of cache on call 3")
            return x * 2


    def flaky():
        return Flaky()


    def broken():
        raise RuntimeError("no weights for this net\\nsecond line")


    def not_a_module():
        return 42
''')

SHARE_LINE = re.compile(r"# boo-tui: calls=(\d+) share=(\d+\.\d\d)% self=(\d+\.\d\d)% us=(\d+\.\d)")
INPUT = "2x3x16x16"


def read_commands(path: Path) -> tuple[list[str], list[tuple[int, float, str]]]:
    """The header lines and, per command, (calls, share, command); checks the `# boo-tui:` line precedes each."""
    lines = path.read_text().splitlines()
    header: list[str] = []
    while lines and not SHARE_LINE.fullmatch(lines[0]):
        assert lines[0].startswith("#"), lines[0]
        header.append(lines.pop(0))
    commands = []
    for meta, cmd in zip(lines[0::2], lines[1::2]):
        m = SHARE_LINE.fullmatch(meta)
        assert m, meta
        assert not cmd.startswith("#")
        commands.append((int(m[1]), float(m[2]), cmd))
    assert len(lines) == 2 * len(commands)
    shares = [s for _, s, _ in commands]
    assert shares == sorted(shares, reverse=True), "ordered by share, largest first"
    return header, commands


def aten_lists(cmd: str) -> tuple[str, list, list, list, list]:
    name, rest = cmd.split(" ", 1)
    parts = re.fullmatch(r'"(.*)" "(.*)" "(.*)" "(.*)"', rest)
    assert parts, cmd
    lists = [ast.literal_eval(p) for p in parts.groups()]
    assert all(isinstance(x, list) for x in lists)
    assert len({len(x) for x in lists}) == 1, "four lists of equal length"
    return name, *lists


def calls_of(commands, prefix: str) -> dict[str, int]:
    return {c: n for n, _, c in commands if c.startswith(prefix)}


def signatures(commands) -> dict[object, int]:
    """The MIOpenDriver lines parsed back: signature -> calls."""
    out: dict[object, int] = {}
    for n, _, c in commands:
        if not c.startswith("aten::"):
            sig = parse_command(c)
            assert sig not in out, f"identical calls merged: {c}"
            out[sig] = n
    return out


def conv(c, k, stride=1, pad=1, bias=False, forw=1, layout="NCHW", out_layout=None, hw=16):
    return ConvSignature("float32", 2, c, k, (hw, hw), (3, 3), (stride, stride), (pad, pad), (1, 1), bias=bias,
                         forw=forw, in_layout=layout, fil_layout=layout, out_layout=out_layout or layout)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("model") / "net.py"
    path.write_text(MODEL)
    return path


def capture(model_file: Path, out: Path, *extra: str, inputs=(INPUT,)) -> list[tuple[int, float, str]]:
    args = ["capture", f"{model_file}:make", "-o", str(out), "--threads", "1", *extra]
    for spec in inputs:
        args += ["--input", spec]
    assert main(args) == 0
    return read_commands(out)[1]


@pytest.fixture(scope="module")
def forward(model_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("fwd") / "cmds.txt"
    return out, capture(model_file, out)


@pytest.fixture(scope="module")
def backward(model_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("bwd") / "cmds.txt"
    return capture(model_file, out, "--backward")


def test_forward_capture_writes_miopen_lines_equal_to_the_calls(forward):
    out, commands = forward
    header = read_commands(out)[0]
    text = "\n".join(header)
    assert "net.py:make" in text and INPUT in text and torch.__version__ in text and "compute total" in text
    sigs = signatures(commands)
    assert sigs[conv(3, 8, bias=True)] == 1
    assert sigs[conv(8, 8)] == 2                       # the body conv, called twice, merged
    assert sigs[conv(8, 16, stride=2, pad=0)] == 1
    assert sigs[BatchNormSignature("float32", (2, 8, 16, 16), "NCHW", True, "forward_training", run=True,
                                   save=True)] == 1
    assert sigs[GemmSignature("float32", m=2, k=32, n=12, trans_b=True)] == 1   # x @ w.T, w stored (12, 32)
    (ln,) = [s for s in sigs if s.op == "layernorm"]
    assert ln.input_shape == (2, 32) and ln.normalized_dim == 1 and ln.forw == 1
    assert len(ln.input_shapes()) == 3, "weight and bias: --mode 1"
    assert len(sigs) == 6


def test_forward_capture_keeps_the_outermost_compute_ops_as_aten_lines(forward):
    _, commands = forward
    aten = {}
    for n, _, c in commands:
        if c.startswith("aten::"):
            name, dims, types, strides, concrete = aten_lists(c)
            aten[name] = (n, dims, types, strides, concrete)
    assert set(aten) == {"aten::relu", "aten::mean", "aten::linear", "aten::gelu", "aten::bmm", "aten::softmax",
                         "aten::matmul"}
    n, dims, types, strides, concrete = aten["aten::bmm"]
    assert dims == [[2, 49, 16], [2, 16, 49]] and types == ["float", "float"]
    assert strides[0] == [784, 1, 49], "the strides the transposed view really had"
    assert aten["aten::linear"][1] == [[2, 16], [32, 16], [32]]
    assert aten["aten::softmax"][4][1] == "-1"
    assert sum(n for n, _, _ in commands) == 14


def test_backward_capture_records_the_ops_under_the_autograd_nodes(backward):
    sigs = signatures(backward)
    assert sigs[conv(3, 8, forw=9)] == 1, "the stem's input needs no grad: weight + bias grads"
    assert sigs[conv(8, 8, forw=6)] == 2
    # the down conv's dLdy comes back through the tokens' transpose: really channels-last, and said so
    assert sigs[conv(8, 16, stride=2, pad=0, forw=6, out_layout="NHWC")] == 1
    assert sigs[BatchNormSignature("float32", (2, 8, 16, 16), "NCHW", True, "backward", save=True)] == 1
    (ln_bwd,) = [s for s in sigs if s.op == "layernorm" and s.forw != 1]
    assert ln_bwd.forw == 14 and ln_bwd.input_shape == (2, 32)
    gemms = {s for s in sigs if s.op == "gemm"}
    # head: forward x @ w.T; backward dx = dy @ w (w (12, 32) row-major), dw = dy.T @ x (dy read transposed)
    assert GemmSignature("float32", m=2, k=12, n=32) in gemms
    assert GemmSignature("float32", m=12, k=2, n=32, trans_a=True) in gemms
    names = {c.split(" ", 1)[0] for _, _, c in backward}
    assert {"aten::gelu_backward", "aten::_softmax_backward_data", "aten::threshold_backward"} <= names
    assert not [c for c in names if "Backward" in c or c.startswith("autograd")], "no autograd node names"
    assert not {n.removeprefix("aten::") for n in names} & NON_COMPUTE
    assert "aten::sum" not in {c.split(" ", 1)[0] for _, _, c in backward if "[[2, 12]" in c}, \
        "the loss is not recorded: backward starts from ones"
    for _, _, c in backward:
        if c.startswith("aten::"):
            aten_lists(c)


def test_nhwc_capture_reads_channels_last_from_the_strides(model_file, tmp_path):
    commands = capture(model_file, tmp_path / "nhwc.txt", "--layout", "nhwc", "--backward")
    sigs = signatures(commands)
    assert sigs[conv(3, 8, bias=True, layout="NHWC")] == 1
    assert sigs[conv(8, 8, layout="NHWC")] == 2
    assert BatchNormSignature("float32", (2, 16, 16, 8), "NHWC", True, "forward_training", run=True,
                              save=True) in sigs
    assert BatchNormSignature("float32", (2, 16, 16, 8), "NHWC", True, "backward", save=True) in sigs
    bwd = [s for s in sigs if s.op == "conv" and s.forw != 1]
    assert bwd and all(s.in_layout == "NHWC" and s.fil_layout == "NHWC" for s in bwd)


def test_nhwc_capture_of_a_conv3d_model_is_channels_last_3d(model_file, tmp_path):
    out = tmp_path / "volume.txt"
    assert main(["capture", f"{model_file}:volume", "--input", "1x4x4x6x6", "--layout", "nhwc", "--backward",
                 "-o", str(out)]) == 0
    convs = {s for s in signatures(read_commands(out)[1]) if s.op == "conv"}
    assert ConvSignature("float32", 1, 4, 8, (4, 6, 6), (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1),
                         in_layout="NDHWC", fil_layout="NDHWC", out_layout="NDHWC") in convs
    assert convs and all(s.in_layout == "NDHWC" and s.fil_layout == "NDHWC" for s in convs), convs


def test_eval_mode_batch_norm_is_inference(model_file, tmp_path):
    sigs = signatures(capture(model_file, tmp_path / "eval.txt", "--eval"))
    assert BatchNormSignature("float32", (2, 8, 16, 16), "NCHW", True, "forward_inference", run=True) in sigs


def test_bfloat16_model_gets_bfp16_lines_and_its_bf16_batch_norm_stays_aten(model_file, tmp_path):
    out = tmp_path / "bf16net.txt"
    commands = capture(model_file, out, inputs=("2x3x16x16:bfloat16",))
    sigs = signatures(commands)
    assert ConvSignature("bfloat16", 2, 3, 8, (16, 16), (3, 3), (1, 1), (1, 1), (1, 1), bias=True) in sigs
    assert GemmSignature("bfloat16", m=2, k=32, n=12, trans_b=True) in sigs
    assert not [s for s in sigs if s.op == "bnorm"], "MIOpen keeps bnorm parameters in float32; these were bf16"
    (bn,) = [c for _, _, c in commands if c.startswith("aten::batch_norm")]
    assert aten_lists(bn)[2][:3] == ["c10::BFloat16"] * 3


def test_bfloat16_input_runs_the_model_in_bfloat16(model_file, tmp_path):
    out = tmp_path / "bf16.txt"
    assert main(["capture", f"{model_file}:linear_only", "--input", "4x32:bfloat16", "-o", str(out)]) == 0
    (cmd,) = [c for _, _, c in read_commands(out)[1]]
    assert cmd.startswith("gemmbfp16 ")
    assert parse_command(cmd) == GemmSignature("bfloat16", m=4, k=32, n=12, trans_b=True)


def test_layernorm_without_affine_is_mode_0(model_file, tmp_path):
    out = tmp_path / "ln.txt"
    assert main(["capture", f"{model_file}:plain_norm", "--input", "4x16", "--backward", "-o", str(out)]) == 0
    lns = {parse_command(c) for _, _, c in read_commands(out)[1] if c.startswith("layernorm")}
    assert {(s.forw, len(s.input_shapes())) for s in lns} == {(1, 1), (2, 5)}, \
        "forward takes x alone; the input grad takes dLdy, x, weight (all ones in mode 0, as BOO's), mean, rstd"
    assert all("--mode 0" in c for _, _, c in read_commands(out)[1] if c.startswith("layernorm"))


def test_conv_1d_3d_transposed_grouped(model_file, tmp_path):
    out = tmp_path / "shapes.txt"
    assert main(["capture", f"{model_file}:shapes", "--input", "2x4x20", "--input", "2x4x5x6",
                 "--input", "1x4x3x8x8", "-o", str(out)]) == 0
    sigs = set(signatures(read_commands(out)[1]))
    assert sigs == {
        ConvSignature("float32", 2, 4, 6, (20,), (5,), (2,), (2,), (1,), bias=True),
        ConvSignature("float32", 2, 4, 8, (5, 6), (3, 3), (2, 2), (1, 1), (1, 1), groups=2, bias=True,
                      transposed=True, output_padding=(1, 1)),
        ConvSignature("float32", 1, 4, 4, (3, 8, 8), (1, 3, 3), (1, 1, 1), (0, 1, 1), (1, 2, 2)),
    }


def _record_trace(path: Path, record_shapes: bool = True) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("trace_net", path.parent / "net.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    net, x = mod.make(), torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        net(x)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                    record_shapes=record_shapes) as prof:
            for _ in range(2):
                net(x)
    prof.export_chrome_trace(str(path))


def test_trace_import_of_a_real_trace(model_file, tmp_path):
    (tmp_path / "net.py").write_text(MODEL)
    trace = tmp_path / "trace.json"
    _record_trace(trace)
    out = tmp_path / "from_trace.txt"
    assert main(["capture", "--trace", str(trace), "-o", str(out)]) == 0
    header, commands = read_commands(out)
    assert any("profiled region" in h for h in header)
    sigs = signatures(commands)
    assert sigs[conv(3, 8, bias=True)] == 2            # two profiled passes
    assert sigs[conv(8, 8)] == 4
    assert GemmSignature("float32", m=2, k=32, n=12, trans_b=True) in sigs
    names = {c.split(" ", 1)[0] for _, _, c in commands}
    assert not names & {"aten::convolution", "aten::_convolution", "aten::mkldnn_convolution", "aten::addmm",
                        "aten::native_batch_norm", "aten::clamp_min", "aten::_softmax", "aten::mm"}, \
        "only the outermost op of each call chain"
    assert "aten::linear" in names and "aten::softmax" in names
    text = out.read_text()
    assert "self=" in text


def test_trace_with_profiler_steps_takes_their_spans_as_the_total(model_file, tmp_path):
    (tmp_path / "net.py").write_text(MODEL)
    trace, out = tmp_path / "steps.json", tmp_path / "steps.txt"
    import importlib.util

    spec = importlib.util.spec_from_file_location("steps_net", tmp_path / "net.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    net, x = mod.make(), torch.randn(2, 3, 16, 16)
    sched = torch.profiler.schedule(wait=1, warmup=1, active=2)
    with torch.no_grad(), torch.profiler.profile(record_shapes=True, schedule=sched,
                                                 on_trace_ready=lambda p: p.export_chrome_trace(str(trace))) as prof:
        for _ in range(4):
            net(x)
            prof.step()
    assert main(["capture", "--trace", str(trace), "-o", str(out)]) == 0
    header, commands = read_commands(out)
    assert any("2 ProfilerStep# spans" in h for h in header), header
    assert sum(n for n, _, _ in commands) == 2 * 14, "the two recorded steps' calls, the warm-up's left out"


def test_trace_with_gpu_kernels_says_their_time_is_not_attributed(model_file, tmp_path):
    (tmp_path / "net.py").write_text(MODEL)
    trace = tmp_path / "gpu.json"
    _record_trace(trace)
    data = json.loads(trace.read_text())
    first = next(ev for ev in data["traceEvents"] if ev.get("name") == "aten::conv2d")
    # what a CUDA trace adds beside the CPU ops: a kernel on a stream of its own
    data["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "implicit_convolve_sgemm", "pid": 0, "tid": 7,
                                "ts": first["ts"] + 1, "dur": 3.0, "args": {"External id": first["args"]["External id"]}})
    trace.write_text(json.dumps(data))
    out = tmp_path / "gpu.txt"
    assert main(["capture", "--trace", str(trace), "-o", str(out)]) == 0
    header, commands = read_commands(out)
    assert any("1 GPU kernel/copy events are not attributed" in h for h in header), header
    assert not [c for _, _, c in commands if "implicit_convolve" in c]


def test_trace_import_and_live_capture_agree_on_the_commands(forward, tmp_path):
    (tmp_path / "net.py").write_text(MODEL)
    trace = tmp_path / "trace.json"
    _record_trace(trace)
    out = tmp_path / "t.txt"
    assert main(["capture", "--trace", str(trace), "-o", str(out)]) == 0
    from_trace = {c: n for n, _, c in read_commands(out)[1]}
    live = {c: n for n, _, c in forward[1]}
    assert set(from_trace) == set(live)
    assert all(from_trace[c] == 2 * live[c] for c in live)


def test_dense_layout_reads_the_order_from_strides():
    assert dense_layout([2, 8, 4, 4], [128, 16, 4, 1], "NCHW") == "NCHW"
    assert dense_layout([2, 8, 4, 4], [128, 1, 32, 8], "NCHW") == "NHWC"
    assert dense_layout([1, 8, 1, 1], [8, 1, 8, 8], "NCHW") == "NCHW", "size-1 dims: torch order wins ties"
    assert dense_layout([2, 8, 4, 4], [256, 16, 4, 1], "NCHW") is None, "a slice is dense in no order"


@pytest.mark.parametrize("spec, shape, dtype", [
    ("2x3x224x224:float16", (2, 3, 224, 224), "float16"),
    ("8x128:int64", (8, 128), "int64"),
    ("4x4", (4, 4), "float32"),
    ("1x2:bf16", (1, 2), "bfloat16"),
])
def test_input_specs(spec, shape, dtype):
    s = parse_input(spec)
    assert (s.shape, s.dtype) == (shape, dtype)


@pytest.mark.parametrize("spec", ["2x3:float17", "2xx3", "", "axb", "2x3:complex", "-2x3"])
def test_bad_input_specs(spec):
    with pytest.raises(CaptureError):
        parse_input(spec)


def _fails(capsys, args: list[str], *needles: str) -> None:
    assert main(["capture", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("boo-tui capture: error: ") and "Traceback" not in err
    for needle in needles:
        assert needle in err, err


def test_bad_inputs_are_one_line_errors(capsys, model_file, tmp_path):
    out = str(tmp_path / "o.txt")
    not_json = tmp_path / "t.json"
    not_json.write_text("{not json")
    _fails(capsys, ["--trace", str(not_json), "-o", out], "not a JSON")
    no_shapes = tmp_path / "ns.json"
    (tmp_path / "net.py").write_text(MODEL)
    _record_trace(no_shapes, record_shapes=False)
    _fails(capsys, ["--trace", str(no_shapes), "-o", out], "record_shapes=True")
    not_trace = tmp_path / "nt.json"
    not_trace.write_text(json.dumps({"a": 1}))
    _fails(capsys, ["--trace", str(not_trace), "-o", out], "traceEvents")
    bad_import = tmp_path / "bad.py"
    bad_import.write_text("import torch\nraise ImportError('needs the foo package')\n")
    _fails(capsys, [f"{bad_import}:make", "--input", INPUT, "-o", out], "cannot import", "needs the foo package")
    _fails(capsys, [f"{model_file}:broken", "--input", INPUT, "-o", out], "no weights for this net")
    _fails(capsys, [f"{model_file}:not_a_module", "--input", INPUT, "-o", out], "not a torch.nn.Module")
    _fails(capsys, [f"{model_file}:nothere", "--input", INPUT, "-o", out], "no callable 'nothere'")
    _fails(capsys, [str(model_file), "--input", INPUT, "-o", out], ":factory")
    _fails(capsys, [f"{model_file}:make", "--input", "2x3x16x16:float17", "-o", out], "float17")
    _fails(capsys, [f"{model_file}:make", "--input", "2x3x16", "-o", out], "the model's", "failed")
    _fails(capsys, [f"{model_file}:flaky", "--input", INPUT, "-o", out], "a pass of the model failed",
           "ran out of cache on call 3")
    _fails(capsys, [f"{model_file}:make", "--input", INPUT], "-o")
    _fails(capsys, ["-o", out], "MODEL")
    assert not Path(out).exists()


def test_an_unwritable_output_is_refused_before_the_model_runs(capsys, tmp_path):
    marker = tmp_path / "imported"
    model = tmp_path / "m.py"
    model.write_text(f"open({str(marker)!r}, 'w').close()\nimport torch\ndef make():\n    return torch.nn.ReLU()\n")
    _fails(capsys, [f"{model}:make", "--input", "2x2", "-o", str(tmp_path / "missing" / "o.txt")], "does not exist")
    _fails(capsys, [f"{model}:make", "--input", "2x2", "-o", str(tmp_path)], "is a directory")
    assert not marker.exists(), "refused before the model was imported"
