"""The model zoo (zoo/*.py): every factory builds and is captured by `boo-tui capture` (forward, float32) into a
non-empty commands file whose every line our grammar reads back, with the parts the zoo promises (depthwise
convs, attention, rotary embeddings, group norm, ...); backward, bfloat16 and channels-last captures of two of them;
and a handful of the captured lines compiled with IREE and measured by `boo-tui` headless, numerics passing.

The whole zoo through compile and numerics is benchmarks/bench_zoo.py (tens of minutes; figures in
docs/performance.md)."""
from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
from cli_support import run

from boo_engine.commands import parse_command
from boo_tui.cli import main

ZOO = Path(__file__).resolve().parent.parent / "zoo"


def _zoo() -> list[tuple[Path, str, list[str], bool, str | None]]:
    """(file, factory, inputs, conv net?, bf16 factory) for every factory the zoo's files list in INPUTS."""
    out = []
    for path in sorted(ZOO.glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"_zoo_test_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for name, inputs in module.INPUTS.items():
            assert callable(getattr(module, name, None)), f"{path.name}: INPUTS names {name}, which it lacks"
            bf16 = getattr(module, "BF16", {}).get(name)
            assert bf16 is None or callable(getattr(module, bf16, None)), f"{path.name}: no factory {bf16}"
            assert set(module.CONV_NETS) <= set(module.INPUTS)
            out.append((path, name, list(inputs), name in module.CONV_NETS, bf16))
    return out


MODELS = _zoo()
# what each model is there for: a pattern its forward capture must hold
PARTS = {
    "resnet_basic": [r"^conv .*-y 3 -u 2 ", r"^conv .*-y 1 -u 2 ", r"^bnorm ", r"^aten::max_pool2d "],
    "resnet_bottleneck": [r"^conv .*-y 1 .*-b 0", r"^conv .*-y 3 -u 2 ", r"^bnorm "],
    "mobilenet": [r"^conv .*-c 64 -k 64 .*-g 64 ", r"^conv .*-y 5 .*-g 72 ", r"^aten::hardsigmoid ",
                  r"^aten::hardswish ", r"^aten::hardtanh "],
    "vit": [r"^conv .*-y 4 -u 4 ", r"^aten::scaled_dot_product_attention ", r"^layernorm", r"^aten::gelu ",
            r"^aten::cat "],
    "bert": [r"^aten::embedding ", r"^aten::softmax ", r"^aten::matmul ", r"^layernorm|^aten::layer_norm ",
             r"^aten::tanh "],
    "llama": [r"^aten::scaled_dot_product_attention .*'True'", r"^aten::rsqrt ", r"^aten::silu ", r"^aten::cat ",
              r"^aten::pow "],
    "unet": [r"^conv .*-m trans ", r"^aten::group_norm ", r"^aten::upsample_nearest2d ",
             r"^aten::upsample_bilinear2d ", r"^aten::silu "],
    "conv1d": [r"^conv .*--spatial_dim 1 .*-g 4 ", r"^aten::pad ", r"^aten::batch_norm "],
    "conv3d": [r"^conv .*--spatial_dim 3 ", r"^aten::max_pool3d "],
}


def capture(tmp_path: Path, path: Path, factory: str, inputs: list[str], *extra: str) -> list[str]:
    out = tmp_path / f"{factory}.txt"
    args = ["capture", f"{path}:{factory}", "--threads", "1", "-o", str(out), *extra]
    for spec in inputs:
        args += ["--input", spec]
    assert main(args) == 0
    return [ln for ln in out.read_text().splitlines() if ln.strip() and not ln.startswith("#")]


def test_the_zoo_has_every_family_the_issue_names():
    assert {name for _, name, _, _, _ in MODELS} == set(PARTS)
    assert {name for _, name, _, conv, _ in MODELS if conv} == {"resnet_basic", "resnet_bottleneck", "mobilenet",
                                                                 "vit", "unet", "conv3d"}


@pytest.mark.parametrize("path, factory, inputs, conv, bf16", MODELS, ids=[m[1] for m in MODELS])
def test_every_factory_captures_forward_to_grammar_valid_commands(path, factory, inputs, conv, bf16, tmp_path):
    commands = capture(tmp_path, path, factory, inputs)
    assert commands and len(set(commands)) == len(commands)
    for cmd in commands:
        parse_command(cmd)      # every line read back by the grammar (an aten line resolves its overload)
    for part in PARTS[factory]:
        assert any(re.search(part, c) for c in commands), f"{factory}: no line matches {part!r}"


@pytest.fixture(scope="module")
def backward_lines(tmp_path_factory) -> dict[str, list[str]]:
    """A conv net's and a transformer's forward + backward captures: resnet_basic in bfloat16 channels-last,
    llama in float32; bert's bfloat16 factory forward."""
    tmp = tmp_path_factory.mktemp("zoo-bwd")
    by = {m[1]: m for m in MODELS}
    out = {}
    path, _, inputs, _, _ = by["resnet_basic"]
    out["resnet_basic"] = capture(tmp, path, "resnet_basic", [f"{s}:bfloat16" for s in inputs], "--backward",
                                  "--layout", "nhwc")
    path, _, inputs, _, _ = by["llama"]
    out["llama"] = capture(tmp, path, "llama", inputs, "--backward")
    path, _, inputs, _, bf16 = by["bert"]
    out["bert_bf16"] = capture(tmp, path, bf16, inputs)
    return out


def test_backward_bf16_and_channels_last_captures_are_grammar_valid(backward_lines):
    resnet = backward_lines["resnet_basic"]
    for cmd in resnet + backward_lines["llama"] + backward_lines["bert_bf16"]:
        parse_command(cmd)
    convs = [c for c in resnet if c.startswith("conv")]
    assert convs and all(c.startswith("convbfp16 ") and "-I NHWC" in c for c in convs)
    assert {re.search(r" -F (\d+) ", c)[1] for c in convs} >= {"1", "4", "6"}, "forward, weight (stem), both grads"
    assert any(c.startswith("aten::_scaled_dot_product_flash_attention_for_cpu_backward ")
               for c in backward_lines["llama"])
    assert any(c.startswith("aten::silu_backward ") for c in backward_lines["llama"])
    assert all("'float'" not in c for c in backward_lines["bert_bf16"] if c.startswith("aten::softmax"))


def test_representative_captured_lines_compile_measure_and_pass_numerics(backward_lines, tmp_path, cli_env):
    """A few lines as the zoo captured them, through `boo-tui` headless (real IREE compiles, the benchmark
    worker, numerics against float64): a depthwise conv, a bf16 channels-last conv's data and weight gradients, a causal
    attention and a bf16 masked softmax (test_aten_lowering.py compiles the zoo's lines our fixes are about)."""
    by = {m[1]: m for m in MODELS}
    path, _, inputs, _, _ = by["mobilenet"]
    mobilenet = capture(tmp_path, path, "mobilenet", inputs)
    pick = [
        next(c for c in mobilenet if re.search(r"^conv .*-y 3 .*-g 64 ", c)),
        next(c for c in backward_lines["resnet_basic"] if re.search(r"^convbfp16 .*-y 3 -u 1 .* -F 6 ", c)),
        next(c for c in backward_lines["llama"] if c.startswith("aten::scaled_dot_product_attention ")),
        next(c for c in backward_lines["bert_bf16"] if c.startswith("aten::softmax ")),
    ]
    cmds = tmp_path / "picked.txt"
    cmds.write_text("".join(c + "\n" for c in pick))
    export = tmp_path / "picked.json"
    p = run([cmds, "--target", "cpu", "--backend", "iree", "--iter", "3", "--min-time", "0", "--rounds", "1",
             "--db", tmp_path / "r.db", "--export", export], cli_env, tmp_path, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    results = json.loads(export.read_text())["results"]
    assert sorted(r["command"] for r in results if r["variant"] == "baseline") == sorted(pick)   # BOO's build
    assert sorted(r["command"] for r in results if r["variant"] == "best") == sorted(pick)       # and the best
    for r in results:
        assert r["status"] == "done", (r["command"][:80], r["error"])
        assert r["numerics"]["verdict"] == "pass", (r["command"][:80], r["numerics"]["stats"].get("reason"))
