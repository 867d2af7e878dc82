"""Targets: parsing with one-line errors, flags, drivers, cache identity, detection, per-op CPU defaults."""
from __future__ import annotations

import subprocess
import sys

import pytest

from boo_engine.commands import parse_command
from boo_engine.cpu_defaults.machine import host_cpu, per_op_default_flags
from boo_engine.cpu_defaults.rules import DATA_TILING, IM2COL, REASSOCIATE
from boo_engine.errors import TargetError
from boo_engine.hostcpu import host_cpu_identity
from boo_engine.targets import Target, default_target, parse_target


@pytest.mark.parametrize("text, name, driver", [
    ("cpu", "cpu", "local-sync"),
    ("hip:gfx942", "hip:gfx942", "hip"),
    ("hip:gfx90a", "hip:gfx90a", "hip"),
    ("hip:gfx1100", "hip:gfx1100", "hip"),
    ("cuda:sm_80", "cuda:sm_80", "cuda"),
    ("cuda:sm_120", "cuda:sm_120", "cuda"),
    (" CPU ", "cpu", "local-sync"),
])
def test_parse_valid(text, name, driver):
    t = parse_target(text)
    assert t.name == name and t.driver == driver and str(t) == name


@pytest.mark.parametrize("text, words", [
    ("tpu", "unknown target"),
    ("", "unknown target"),
    ("hip", "needs an arch"),
    ("hip:942", "not a gfx arch"),
    ("hip:gfx94", "not a gfx arch"),
    ("cuda", "needs an arch"),
    ("cuda:80", "not an sm arch"),
    ("cpu:znver4", "takes no arch"),
])
def test_parse_invalid_is_one_line(text, words):
    with pytest.raises(TargetError, match=words) as ei:
        parse_target(text)
    assert "\n" not in str(ei.value)


@pytest.mark.parametrize("arch", ["sm_90", "sm_90a", "sm_100"])
def test_archs_iree_cannot_build_get_the_ptx_fallback_and_say_so(arch):
    """IREE 3.13 has no Hopper/Blackwell entry: those GPUs run sm_80 PTX that the driver JIT-compiles."""
    t = parse_target(f"cuda:{arch}")
    assert (t.arch, t.runs_on) == ("sm_80", arch)
    assert t.compile_flags()[-1] == "--iree-cuda-target=sm_80"
    assert t.identity() == "cuda:sm_80"            # the artifact is the sm_80 build: shared cache entries
    assert arch in t.notice and "JIT" in t.notice and "\n" not in t.notice
    assert parse_target("cuda:sm_80").notice is None


def test_compile_flags_and_threads():
    assert Target("cpu").compile_flags() == [
        "--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
        "--iree-llvmcpu-target-cpu=host"]
    assert parse_target("hip:gfx942").compile_flags() == ["--iree-hal-target-device=hip", "--iree-rocm-target=gfx942"]
    assert parse_target("cuda:sm_80").compile_flags() == ["--iree-hal-target-device=cuda", "--iree-cuda-target=sm_80"]
    assert Target("cpu", threads=4).driver == "local-task"


def test_identity_names_the_host_cpu_and_is_stable_across_processes():
    ident = Target("cpu").identity()
    assert ident.startswith("cpu:") and "features-" in ident
    other = subprocess.run([sys.executable, "-c", "from boo_engine.targets import Target; print(Target('cpu').identity())"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert other == ident
    assert Target("cpu", threads=8).identity() == ident  # threads do not change the artifact
    assert parse_target("hip:gfx942").identity() == "hip:gfx942"
    assert host_cpu_identity()


def test_detection_never_crashes_and_falls_back_to_cpu():
    t = default_target()
    assert t.kind in ("cpu", "hip", "cuda")
    assert Target("cpu").can_run()
    if t.kind == "cpu":
        assert not parse_target("hip:gfx942").can_run() and not parse_target("cuda:sm_80").can_run()


NHWC = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC"


@pytest.mark.parametrize("command, expected", [
    ("conv -n 2 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 -F 1", [] if host_cpu().has("avx512f") else [IM2COL]),
    (f"conv -n 2 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 -F 1 {NHWC}", [IM2COL]),
    ("conv -n 2 -c 8 -H 8 -W 8 -k 8 -y 1 -x 1 -F 1", [IM2COL]),
    (f"conv -n 2 -c 8 -H 8 -W 8 -k 8 -y 1 -x 1 -F 1 {NHWC}", []),
    # fp16 / bf16 NHWC 1x1: data-tiling depends on the CPU's features (test_cpu_defaults.py)
    (f"convfp16 -n 2 -c 8 -H 8 -W 8 -k 8 -y 1 -x 1 -F 1 {NHWC}", [DATA_TILING] if host_cpu().has("avx512f") else []),
    (f"convbfp16 -n 2 -c 8 -H 8 -W 8 -k 8 -y 1 -x 1 -F 1 {NHWC}",
     [DATA_TILING] if host_cpu().has("avx512bf16", "amx-bf16") else []),
    ("convbfp16 -n 2 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 -F 1", []),
    ("convfp16 -n 2 -c 8 -H 8 -W 8 -k 8 -y 1 -x 1 -F 1", []),
    ("conv -n 2 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 -F 2", []),
    ("conv -n 2 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 -F 1 -m trans", []),
    ("gemm --a_w 8 --a_h 8 --b_w 8", []),
    ("layernorm --input 2x8", [REASSOCIATE]),   # a reduction: reassociated sums
])
def test_per_op_defaults(command, expected):
    flags = per_op_default_flags(parse_command(command), Target("cpu"))
    if expected is not None:
        assert flags == expected
    assert per_op_default_flags(parse_command(command), parse_target("hip:gfx942")) == []
    assert per_op_default_flags(parse_command(command), Target("cpu", per_op_defaults=False)) == []  # plain IREE


@pytest.mark.parametrize("prefix", ["convbfp16", "convfp16"])
@pytest.mark.parametrize("rest", ["-y 3 -x 3 -F 1", "-y 1 -x 1 -F 1", f"-y 3 -x 3 -F 1 {NHWC}", "-y 3 -x 3 -F 2",
                                  "-y 3 -x 3 -F 4"])
def test_low_precision_never_gets_im2col(prefix, rest):
    """bf16/fp16 + im2col fails to compile in IREE 3.13 ('arith.addf' op requires the same type ...)."""
    flags = per_op_default_flags(parse_command(f"{prefix} -n 2 -c 8 -H 8 -W 8 -k 8 {rest}"), Target("cpu"))
    assert IM2COL not in flags


def test_direct_construction_is_validated():
    with pytest.raises(TargetError):
        Target("hip")  # no arch
    with pytest.raises(TargetError):
        Target("tpu", "v5")  # type: ignore[arg-type]
    with pytest.raises(TargetError):
        Target("cpu", threads=0)
    assert Target("cuda", "sm_86").name == "cuda:sm_86"
