"""Fuzz the grammar: whatever the tokens, a command parses into a signature or raises CommandError. Nothing
else may escape (no IndexError, KeyError, ZeroDivisionError, torch error, SystemExit)."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boo_engine.commands import OPS, parse_command, parse_invocation, read_commands_file
from boo_engine.commands.conv import CONV_FLAGS
from boo_engine.commands.gemm import GEMM_FLAGS
from boo_engine.commands.layernorm import LAYERNORM_FLAGS
from boo_engine.errors import CommandError
from boo_engine.ops.base import OpSignature

_ALL_FLAGS = [*CONV_FLAGS, *GEMM_FLAGS, *LAYERNORM_FLAGS]
try:  # bnorm's table when present
    from boo_engine.commands.bnorm import BNORM_FLAGS

    _ALL_FLAGS += list(BNORM_FLAGS)
except ImportError:  # pragma: no cover
    pass
FLAG_TOKENS = sorted({f"--{f.long}" for f in _ALL_FLAGS} | {f"-{f.short}" for f in _ALL_FLAGS if f.short}
                     | {"--iter", "-t", "--time", "-i", "--", "-", "---", "--=", "--in_layout="})
VALUE_TOKENS = ["0", "1", "2", "3", "-1", "-0", "+2", "7", "16", "10", "14", "1e-5", "nan", "inf", "1.5", "x",
                "NCHW", "NHWC", "NCDHW", "NDHWC", "NCH", "CHWN", "NC", "nhwc", "HWNC", "trans", "conv",
                "4x8", "4x8x16", "0x3", "2x", "x2", "1_000", " 3", "99999999999999999999", "2147483648",
                "٣", "²", "ＮＣＨＷ", "'", '"', "=", "", " ", "\t", "#"]
SIZE_TOKENS = [str(i) for i in range(0, 12)]
ops = st.sampled_from(sorted(OPS) + ["convx", "MIOpenDriver", "", "bnorm"])
token = st.one_of(st.sampled_from(FLAG_TOKENS), st.sampled_from(VALUE_TOKENS), st.sampled_from(SIZE_TOKENS),
                  st.text(max_size=6))
VALID = [
    "conv -n 2 -c 8 -H 16 -W 16 -k 8 -y 1 -x 1 -F 1 -b 1",
    "convbfp16 -n 4 -c 96 -H 12 -W 8 -k 96 -y 3 -x 1 -p 2 -q 0 -u 1 -v 1 -l 2 -j 2 -m conv -g 1 -F 2 "
    "--in_layout NHWC --out_layout NHWC --fil_layout NHWC",
    "conv -_ 3 -n 1 -c 4 -! 5 -H 6 -W 7 -k 8 -@ 1 -y 2 -x 3 -u 2 -m trans -Y 1",
    "layernorm --input 16x128x768 --eps 1e-5 --mode 1 --normalized_dim 2 -F 14",
    "gemm --a_w 256 --a_h 512 --b_w 512 --transB 1 -F 1 --iter 5 -t 1",
]


def _check(tokens) -> None:
    try:
        sig = parse_command(tokens)
    except CommandError as exc:
        msg = str(exc)
        assert msg and "\n" not in msg
        return
    assert isinstance(sig, OpSignature)
    # a signature that parses must be usable without allocating: names, shapes, cost, description
    assert sig.func_name and sig.mode
    sig.input_shapes(), sig.output_shapes(), sig.describe()
    assert sig.flops >= 0 and sig.bytes > 0


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(ops, st.lists(token, max_size=14))
def test_token_soup(op: str, tokens: list[str]) -> None:
    _check([op, *tokens] if op else tokens)


@FUZZ
@given(ops, st.lists(st.tuples(st.sampled_from(FLAG_TOKENS), st.one_of(st.sampled_from(SIZE_TOKENS),
                                                                       st.sampled_from(VALUE_TOKENS))),
                     max_size=10))
def test_flag_value_pairs(op: str, pairs) -> None:
    _check([op] + [t for pair in pairs for t in pair])


@FUZZ
@given(st.sampled_from(VALID), st.data())
def test_mutated_valid_commands(cmd: str, data) -> None:
    tokens = cmd.split()
    for _ in range(data.draw(st.integers(1, 3))):
        kind = data.draw(st.sampled_from(["replace", "delete", "insert", "swap"]))
        i = data.draw(st.integers(0, len(tokens) - 1)) if tokens else 0
        if kind == "replace" and tokens:
            tokens[i] = data.draw(token)
        elif kind == "delete" and tokens:
            del tokens[i]
        elif kind == "insert":
            tokens.insert(i, data.draw(token))
        elif kind == "swap" and len(tokens) > 1:
            j = data.draw(st.integers(0, len(tokens) - 1))
            tokens[i], tokens[j] = tokens[j], tokens[i]
    _check(tokens)


def test_an_op_word_of_whitespace_keeps_the_timing_flags_errors_on_one_line() -> None:
    # found by test_mutated_valid_commands on CI: the op's word starts the message of MIOpenDriver's own flags
    for tokens in (["\n", "-t", "2"], ["\n", "-t"], ["\n", "--iter", "-t"], ["", "-t"]):
        _check(tokens)


@FUZZ
@given(st.text(max_size=80))
def test_raw_strings(text: str) -> None:
    try:
        parse_invocation(text)
    except CommandError as exc:
        assert "\n" not in str(exc)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(VALID), st.text(max_size=30)), max_size=5))
def test_commands_file_collect_never_raises_per_line(tmp_path_factory, lines) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "cmds.txt"
    path.write_text("\n".join(line.replace("\r", " ") for line in lines), encoding="utf-8")
    result = read_commands_file(path, errors="collect")
    for line in result:
        assert (line.command is None) != (line.error is None)
