"""The op/mode corners the grammar accepts beyond tests/test_compile_ops.py's list really become IREE kernels
that run on this CPU and pass BOO's numerics: transposed-conv gradients, 1-D / 3-D convs, odd layouts,
layernorm over several dims, gemm gradients, and batch norm (mixed precision: float32 parameters)."""
from __future__ import annotations

import pytest

from boo_engine.commands import parse_command
from boo_engine.numerics import check_numerics

TRANS = "conv -n 1 -c 4 -H 5 -W 5 -k 6 -y 3 -x 3 -u 2 -v 2 -p 1 -q 1 -m trans -Y 1 -g 2"
COMMANDS = [
    f"{TRANS} -F 1 -b 1",
    f"{TRANS} -F 10",
    f"{TRANS} -F 6 -I NHWC -O NHWC -f NHWC",
    "conv -_ 1 -n 2 -c 4 -H 12 -k 6 -y 3 -p 1 -u 2 -F 1 -b 1",
    "conv -_ 1 -n 2 -c 4 -H 12 -k 6 -y 3 -p 1 -u 2 -F 10 -I NHC -O NHC -f NHC",
    "conv -_ 3 -n 1 -c 2 -! 4 -H 5 -W 4 -k 3 -@ 2 -y 3 -x 1 -$ 1 -F 1 -I NDHWC -O NDHWC -f NDHWC",
    "conv -_ 3 -n 1 -c 2 -! 4 -H 5 -W 4 -k 3 -@ 2 -y 3 -x 1 -$ 1 -F 9",
    "conv -n 2 -c 4 -H 7 -W 6 -k 6 -y 3 -x 2 -p 1 -u 2 -j 2 -g 2 -F 10 -I CHWN -f HWCN -O NWHC",
    "layernorm -X 3x4x8 -m 1 -o 1 -F 14",
    "layernorm -X 3x4x8 -m 1 -o 0 -F 1",
    "layernorm -X 3x4x8 -m 1 -o 0 -F 12",
    "gemm -k 8 -m 16 -n 12 -u 1 -F 2",
    "gemm -k 8 -m 16 -n 12 -v 1 -F 3",
    "bnorm -n 4 -c 8 -H 5 -W 5 -m 1 -F 1 -r 1 -s 1 -L NHWC",
    "bnormbfp16 -n 4 -c 8 -H 5 -W 5 -m 1 -F 1 -L NHWC",
    "bnorm -n 4 -c 3 -H 4 -W 4 -m 0 -F 2",
    "bnorm -n 4 -c 8 -H 5 -W 5 -m 1 -F 0 -b 1 -s 1",
    # a Conv3d net's backward (the zoo's): 1024 values a channel, whose scale and bias grads had 4-7x torch's error
    # std until the sums were chunked (ops/bnorm.py _sum_batch_space)
    "bnorm -n 2 -c 8 -D 8 -H 8 -W 8 -m 1 --layout NCDHW -F 0 -b 1 -s 1 -r 0",
]


# `cache` and `compiled` (every COMMANDS kernel compiled once through the pool) come from conftest.py.


@pytest.mark.parametrize("command", COMMANDS)
def test_corner_kernel_compiles_runs_and_passes_numerics(command, cache, compiled):
    sig = parse_command(command)
    assert compiled[sig.func_name].num_dispatches >= 1
    info = check_numerics(sig, "cpu", cache=cache)
    assert info.verdict == "pass", info.stats.get("reason")
    assert len(info.stats["outputs"]) == len(sig.output_shapes())
