"""Defaults that fit the machine at hand: the resolved host CPU (hostcpu.py), the feature-keyed per-op rules, the
per-machine table `tune --defaults` measures (cpu_defaults/table.py, tune/defaults.py), and where results show them."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from boo_engine import events as ev
from boo_engine.commands import parse_command
from boo_engine.compile.build import compile_signature
from boo_engine.compile.cache import KernelCache
from boo_engine.compile.flags import chosen_flags, compile_flags
from boo_engine.config import SessionConfig
from boo_engine.cpu_defaults.machine import defaults_in_use, host_cpu, per_op_default_flags
from boo_engine.cpu_defaults.rules import DATA_TILING, IM2COL, OpClass, op_class, rule_flags
from boo_engine.environment import collect_environment
from boo_engine.exporters import render_csv
from boo_engine.hostcpu import HostCpu, cpuinfo_host_cpu, parse_target_attribute, resolve_host_cpu
from boo_engine.locations import DEFAULTS_TABLE_ENV
from boo_engine.markdown import render_markdown
from boo_engine.results import DONE, CompileInfo, JobResult, Stats
from boo_engine.session import Session
from boo_engine.targets import Target
from boo_engine.tune.defaults import run_defaults
from boo_engine.variants import Variant

NHWC = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC"
SMALL = "conv -n 1 -c 8 -H 8 -W 8 -k 8 -y 1 -x 1 -F 1"            # class conv:float32:nchw:1x1:forward
OTHER = f"conv -n 1 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 -p 1 -q 1 -F 1 {NHWC}"   # conv:float32:nhwc:kxk:forward
LAYERNORM = "layernorm --input 4x16 -F 1"                        # data-tiling leaves it as it is
GEMM_T = "gemm --a_w 64 --a_h 32 --b_w 48 --transB 1"                # data-tiling: the best column's only
BF16_1X1 = f"convbfp16 -n 1 -c 8 -H 8 -W 8 -k 8 -y 1 -x 1 -F 1 {NHWC}"


def _cpuinfo() -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if not line.strip():
            break
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


# ---- the resolved host CPU ---------------------------------------------------------------------------------

def test_resolved_cpu_is_what_the_compiler_builds_kernels_for(tmp_path):
    cpu = host_cpu()
    assert cpu.source == "iree-compile" and cpu.compiler_version
    assert cpu.name and re.fullmatch(r"[a-z][a-z0-9_.-]*", cpu.name), cpu.name
    # the same name and features as a real kernel's dumped configuration
    art = compile_signature(parse_command(SMALL), "cpu", cache=KernelCache(tmp_path / "k"))
    configs = "".join(p.read_text() for p in Path(art.configs_dir).glob("*.mlir"))
    assert parse_target_attribute(configs) == (cpu.name, cpu.features)
    # and a sane reading of cpuid: the compiler's avx2 / avx512f are the kernel's, and an AMD family is a znver
    flags = set(_cpuinfo().get("flags", "").split())
    if flags:
        assert ("avx2" in flags) == cpu.has("avx2") and ("avx512f" in flags) == cpu.has("avx512f")
    info = _cpuinfo()
    if info.get("vendor_id") == "AuthenticAMD":
        family = int(info["cpu family"])
        expected = {23: ("znver1", "znver2"), 25: ("znver3", "znver4"), 26: ("znver5",)}.get(family)
        if expected:
            assert cpu.name in expected, (family, cpu.name)


def test_resolution_is_remembered_per_compiler_build_and_falls_back_to_cpuinfo(tmp_path):
    flags = Target("cpu").compile_flags()
    memo = tmp_path / "host-cpu.json"
    memo.write_text("{damaged")                           # a damaged memo is asked again, then rewritten
    cpu = resolve_host_cpu(flags, cache_file=memo)
    doc = json.loads(memo.read_text())
    (entry,) = doc["entries"].values()
    assert entry["name"] == cpu.name == host_cpu().name and set(entry["features"]) == set(cpu.features)
    # a compile that cannot happen: /proc/cpuinfo's view, no name, and nothing remembered
    bad = resolve_host_cpu(["--iree-hal-target-device=no-such-device"], cache_file=tmp_path / "other.json")
    assert bad.name is None and bad.source == "/proc/cpuinfo" and not (tmp_path / "other.json").exists()
    assert bad.has("avx2") == cpu.has("avx2") and bad.key_features == cpuinfo_host_cpu().key_features


# ---- rules keyed on the resolved features ------------------------------------------------------------------

ZEN3 = {"avx", "avx2", "fma", "f16c"}
ZEN5 = ZEN3 | {"avx512f", "avx512bw", "avx512bf16", "avx512vnni"}


def test_bf16_data_tiling_needs_native_bf16_dot_products():
    cls = op_class(parse_command(BF16_1X1))
    assert cls == OpClass("conv", "bfloat16", "nhwc", "1x1", "forward")
    assert rule_flags(cls, ZEN3) == []                              # 28x slower on a Zen 3
    assert rule_flags(cls, ZEN3 | {"avx512f"}) == []                 # AVX-512 without bf16 dot products
    assert rule_flags(cls, ZEN5) == [DATA_TILING]                    # 4.3x faster on a Zen 5
    assert rule_flags(cls, ZEN3 | {"amx-tile", "amx-bf16"}) == [DATA_TILING]
    # on this machine: data-tiling exactly when the resolved CPU has them
    flags = per_op_default_flags(parse_command(BF16_1X1), Target("cpu"))
    assert (DATA_TILING in flags) == host_cpu().has("avx512bf16", "amx-bf16")


def test_other_rules():
    fp16 = op_class(parse_command(f"convfp16 -n 1 -c 8 -H 8 -W 8 -k 8 -y 1 -x 1 -F 1 {NHWC}"))
    assert rule_flags(fp16, ZEN3) == [] and rule_flags(fp16, ZEN5) == [DATA_TILING]
    assert rule_flags(op_class(parse_command(SMALL)), ZEN3) == [IM2COL]
    assert rule_flags(op_class(parse_command(OTHER)), ZEN5) == [IM2COL]
    nchw_3x3 = op_class(parse_command("conv -n 1 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 -p 1 -q 1 -F 1"))
    assert rule_flags(nchw_3x3, ZEN3) == [IM2COL] and rule_flags(nchw_3x3, ZEN5) == []   # AVX-512: IREE's conv
    strided = op_class(parse_command("conv -n 1 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 1"))
    assert rule_flags(strided, ZEN5) == [IM2COL]
    assert rule_flags(op_class(parse_command(f"{SMALL} {NHWC}")), ZEN5) == []
    assert rule_flags(op_class(parse_command("conv -n 1 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 -F 2")), ZEN5) == []
    assert str(op_class(parse_command("gemm --a_w 8 --a_h 8 --b_w 8"))) == "gemm:float32:-:-:forward"


# ---- the per-machine table ---------------------------------------------------------------------------------

def test_run_defaults_writes_a_table_that_per_op_defaults_then_uses(tmp_path, monkeypatch, capsys):
    table = tmp_path / "cpu-defaults.json"
    monkeypatch.setenv(DEFAULTS_TABLE_ENV, str(table))
    commands = tmp_path / "cmds.txt"
    commands.write_text(f"# three op classes\n{SMALL}\n{LAYERNORM}\n{GEMM_T}\n")
    cfg = SessionConfig(db_path=str(tmp_path / "r.db"), cache_dir=str(tmp_path / "cache"), iters=15, rounds=2)
    assert run_defaults([str(commands)], cfg) == 0
    printed = capsys.readouterr().err
    assert "conv:float32:nchw:1x1:forward" in printed and "winner" in printed and "im2col+data-tiling" in printed

    doc = json.loads(table.read_text())
    cpu = host_cpu()
    ((key, machine),) = doc["machines"].items()
    assert key.startswith(f"{cpu.name}+{cpu.digest}|") and cpu.compiler_version in key
    entry = machine["classes"]["conv:float32:nchw:1x1:forward"]
    assert set(entry["candidates"]) == {"IREE default", "im2col", "data-tiling", "im2col+data-tiling", "matmul",
                                        "fwdconv", "matmul+data-tiling", "boo"}   # (mixed: gradients only)
    assert entry.get("build") in (None, "boo") and "verdict" in entry["candidates"]["boo"]   # BOO's own, measured
    assert entry["commands"] == [SMALL]
    # a conv class gets the best column's formulation too (a forward conv has no fwdconv form: it fails to build)
    assert entry["formulation"] in ("default", "matmul") and "error" in entry["candidates"]["fwdconv"]
    # the matmul formulation with data-tiling: its flags are the best column's, never the class's per-op flags
    assert entry.get("best_flags") in (None, [DATA_TILING])
    assert (entry.get("best_flags") is not None) is ("best: matmul+data-tiling" in printed)
    # a gemm's data-tiling is measured, may be the best column's (best_flags), never its per-op flags
    gemm = machine["classes"]["gemm:float32:-:-:forward"]
    assert gemm["candidates"]["data-tiling"]["best_only"] == "breaks tuning specs on matmuls"
    assert DATA_TILING not in gemm["flags"] and gemm.get("best_flags") in (None, [DATA_TILING])
    assert "gemm:float32:-:-:forward data-tiling: the best column's only: breaks tuning specs" in printed
    # a set that compiles to the plain kernel is not measured (noise must not win): it is reported as the same
    norm = machine["classes"]["layernorm:float32:-:-:forward"]
    assert norm["flags"] == norm["candidates"][norm["winner"]]["flags"] and "formulation" not in norm
    assert norm["candidates"]["data-tiling"]["note"] == "compiles to the same kernel as IREE's default"
    assert norm["candidates"]["data-tiling"]["ratio"] == 1.0 and "im2col" not in norm["candidates"]
    assert {"fusion", "split-reduction", "fusion+split", "boo"} <= set(norm["candidates"]) and "matmul" not in norm[
        "candidates"]
    assert f"{parse_command(LAYERNORM).func_name} [data-tiling]" not in printed
    sig, cpu_target = parse_command(SMALL), Target("cpu")
    assert per_op_default_flags(sig, cpu_target) == entry["flags"]
    # the table is what decides (not rules that happen to agree): change it and the flags follow
    entry["flags"] = [DATA_TILING, "--iree-opt-level=O2"]
    table.write_text(json.dumps(doc))
    assert per_op_default_flags(sig, cpu_target) == [DATA_TILING, "--iree-opt-level=O2"]
    assert compile_flags(sig, cpu_target)[-2:] == [DATA_TILING, "--iree-opt-level=O2"]
    # a class the table does not hold: the rules
    assert per_op_default_flags(parse_command(OTHER), cpu_target) == [IM2COL]
    # and runs record where their flags came from
    used = defaults_in_use(cpu_target)
    assert used["source"] == "table" and used["path"] == str(table) and len(used["digest"]) == 12
    assert defaults_in_use(Target("cpu", per_op_defaults=False)) == {"source": "off"}


@pytest.mark.parametrize("content", ["{not json", '{"format": "boo-tui-cpu-defaults", "format_version": 1, '
                                     '"machines": {"x": {"classes": {"conv:float32:nchw:1x1:forward": {"flags": 3}}}}}'])
def test_a_damaged_table_is_ignored_with_one_warning_line(tmp_path, monkeypatch, content):
    table = tmp_path / "cpu-defaults.json"
    table.write_text(content)
    monkeypatch.setenv(DEFAULTS_TABLE_ENV, str(table))
    assert per_op_default_flags(parse_command(OTHER), Target("cpu")) == [IM2COL]   # the rules decide
    logs: list[ev.Log] = []
    with Session(SessionConfig(target="cpu", db_path=str(tmp_path / "r.db"), cache_dir=str(tmp_path / "c")),
                 lambda e: logs.append(e) if isinstance(e, ev.Log) else None) as s:
        env = s.environment()
    (warning,) = [log for log in logs if "defaults table" in log.message]
    assert warning.level == "warning" and "\n" not in warning.message and str(table) in warning.message
    assert "Traceback" not in warning.message and "rules decide" in warning.message
    assert env["per_op_defaults"]["source"] == "rules"


def test_usage_errors_exit_2(tmp_path, capsys):
    cfg = SessionConfig(db_path=str(tmp_path / "r.db"))
    assert run_defaults([], cfg) == 2
    assert run_defaults(["conv -n nope"], cfg) == 2
    assert run_defaults([str(tmp_path / "missing.txt")], cfg) == 2
    assert run_defaults([SMALL], SessionConfig(target="hip:gfx942", db_path=str(tmp_path / "r.db"))) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 4 and all(line.startswith("boo-tui tune --defaults: error: ") for line in lines)


# ---- where results show it ---------------------------------------------------------------------------------

def test_environment_and_exports_name_the_resolved_cpu_and_the_flags(tmp_path):
    env = collect_environment("cpu", per_op_defaults=defaults_in_use(Target("cpu")))
    cpu = host_cpu()
    assert env["cpu_name"] == cpu.name and env["cpu_features"] == cpu.key_features
    assert env["per_op_defaults"] == {"source": "rules"}      # conftest switches tables off

    sig = parse_command(SMALL)
    art = compile_signature(sig, "cpu", Variant(name="dt", flags=(DATA_TILING,)), cache=KernelCache(tmp_path / "k"))
    assert chosen_flags(art.command) == [IM2COL, DATA_TILING]    # the rule's, then the variant's; no target flags
    stats = Stats(n=5, min_us=1, max_us=2, mean_us=1.5, median_us=1.5, stddev_us=0.1, p10_us=1, p90_us=2,
                  iqr_us=0.2)
    result = JobResult(job_id="j", command=SMALL, func_name=sig.func_name, op="conv", variant="baseline",
                       target="cpu", backend="iree", status=DONE, stats=stats, samples_us=[1.5] * 5,
                       compile=CompileInfo(command=art.command))
    md = render_markdown([result], environment=env)
    assert f"{cpu.name}: {' '.join(cpu.key_features)}" in md and "per-op defaults: built-in rules" in md
    assert f"`{IM2COL}` `{DATA_TILING}`" in md
    assert f"{IM2COL} {DATA_TILING}" in render_csv([result], {})
    assert HostCpu(name=None, features=frozenset(), source="x").label() == "unknown CPU (no key features)"


def test_detail_pane_shows_the_flags_beyond_the_target(tmp_path):
    from rich.console import Console

    from boo_tui.detail import render_detail
    from boo_tui.run_model import JobView

    art = compile_signature(parse_command(SMALL), "cpu", cache=KernelCache(tmp_path / "k"))
    result = JobResult(job_id="j", command=SMALL, func_name=art.func_name, op="conv", variant="baseline",
                       target="cpu", backend="iree", status=DONE, compile=CompileInfo(command=art.command))
    console = Console(width=300, record=True)
    console.print(render_detail(JobView(result)))
    text = console.export_text()
    (line,) = [ln for ln in text.splitlines() if ln.startswith("flags")]
    assert line.split()[1:] == [IM2COL]          # the per-op default: the rule for f32 NCHW convs
    result.compile = CompileInfo(command=[a for a in art.command if a != IM2COL])
    console.print(render_detail(JobView(result)))
    assert re.search(r"^flags +none beyond the target's", console.export_text(), re.M)


def test_a_flag_earns_its_place_only_by_a_measured_gain():
    from boo_engine.compare import compare_samples
    from boo_engine.tune.defaults import choose
    from boo_engine.tune.defaults_report import Outcome

    rng = np.random.default_rng(0)
    base = list(rng.normal(100, 2, 60))

    def outcome(name, flags, scale, *, note=None, n=60, sd=0.02):
        samples = list(rng.normal(100 * scale, 100 * scale * sd, n))
        return Outcome(name, flags, compare_samples(base, samples), note=note, samples={"k": samples})

    plain = Outcome("IREE default", ())
    im2col = outcome("im2col", (IM2COL,), 0.40, n=10, sd=0.15)
    # 5% apart on paper, but too noisy to tell apart: the extra flag has not earned its place
    assert choose([plain, im2col, outcome("both", (IM2COL, DATA_TILING), 0.38, n=10, sd=0.15)], 0.03) is im2col
    both = outcome("both", (IM2COL, DATA_TILING), 0.30)
    assert choose([plain, im2col, both], 0.03) is both                                          # a real gain
    assert choose([plain, outcome("dt", (DATA_TILING,), 1.0)], 0.03) is plain                    # not faster
    assert choose([plain, outcome("dt", (DATA_TILING,), 0.5, note="breaks specs")], 0.03) is plain  # not eligible


def test_a_best_only_set_or_a_formulations_flags_go_to_the_best_column_never_the_per_op_flags():
    """A gemm's data-tiling (which tuning specs cannot take) that wins is the class's best_flags, its per-op flags
    stay the plain default; a formulation that wins with flags (the matmul with data-tiling) gives the class its
    formulation and those flags for the best column; a flag set that wins is the per-op flags and no best_flags."""
    from boo_engine.compare import compare_samples
    from boo_engine.tune.defaults import settle
    from boo_engine.tune.defaults_report import ClassResult, Outcome

    rng = np.random.default_rng(1)
    base = list(rng.normal(100, 1, 60))

    def outcome(name, flags, scale, **kw):
        samples = list(rng.normal(100 * scale, scale, 60))
        return Outcome(name, flags, compare_samples(base, samples), samples={"k": samples}, **kw)

    gemm = ClassResult(OpClass("gemm", "float32"), ["gemm"], [Outcome("IREE default", ()),
                       outcome("data-tiling", (DATA_TILING,), 0.8, best_only="breaks tuning specs on matmuls")])
    settle(gemm, 0.03)
    assert gemm.winner.name == "IREE default" and gemm.best_choice == "data-tiling"
    assert gemm.entry()["flags"] == [] and gemm.entry()["best_flags"] == [DATA_TILING]
    assert "formulation" not in gemm.entry()

    conv = ClassResult(OpClass("conv", "float32", "nchw", "kxk"), ["conv"], [
        Outcome("IREE default", ()), outcome("im2col", (IM2COL,), 0.9), outcome("matmul", (), 0.8, formulation="matmul"),
        outcome("matmul+data-tiling", (DATA_TILING,), 0.6, formulation="matmul")])
    settle(conv, 0.03)
    e = conv.entry()
    assert e["flags"] == [IM2COL] and e["formulation"] == "matmul" and e["best_flags"] == [DATA_TILING]

    flags_win = ClassResult(OpClass("conv", "float32", "nchw", "kxk"), ["conv"], [
        Outcome("IREE default", ()), outcome("im2col", (IM2COL,), 0.5), outcome("matmul", (), 0.8, formulation="matmul")])
    settle(flags_win, 0.03)
    e = flags_win.entry()
    assert e["flags"] == [IM2COL] and e["formulation"] == "default" and "best_flags" not in e


def test_the_best_column_takes_the_tables_best_flags_with_its_formulation(tmp_path, monkeypatch):
    """What the table stores for the best column is what it builds: a gemm's best-only data-tiling, a conv's
    matmul formulation with data-tiling; a kernel without the table's formulation gets neither; a table whose
    best_flags are not flags is ignored with one warning."""
    from boo_engine.cpu_defaults.machine import defaults_state
    from boo_engine.cpu_defaults.table import machine_key, store_machine
    from boo_engine.variants.best import best_variant

    table = tmp_path / "defaults.json"
    monkeypatch.setenv(DEFAULTS_TABLE_ENV, str(table))
    cpu = host_cpu()
    key = machine_key(cpu.machine_key, cpu.compiler_version)
    store_machine(key, {"classes": {
        "gemm:float32:-:-:forward": {"flags": [], "best_flags": [DATA_TILING]},
        "conv:float32:nchw:kxk:backward:bias": {"flags": [], "formulation": "matmul", "best_flags": [DATA_TILING]},
        "conv:float32:nchw:kxk:forward": {"flags": [], "formulation": "matmul", "best_flags": [DATA_TILING]}}}, table)
    cpu_target = Target("cpu")
    g = parse_command("gemm --a_w 64 --a_h 32 --b_w 48")
    v = best_variant(g, cpu_target)
    assert v.best == "table" and v.flags == (DATA_TILING,) and DATA_TILING not in per_op_default_flags(g, cpu_target)
    c = parse_command("conv -n 1 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 -p 1 -q 1")
    v = best_variant(c, cpu_target)
    assert v.flags == (DATA_TILING,) and dict(v.kernel_formulations) == {c.func_name: "matmul"}
    bias_only = parse_command("conv -n 1 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 -p 1 -q 1 -F 7")   # has no matmul form
    v = best_variant(bias_only, cpu_target)
    assert v.best == "table" and v.flags == () and v.kernel_formulations == ()
    doc = json.loads(table.read_text())
    doc["machines"][key]["classes"]["gemm:float32:-:-:forward"]["best_flags"] = ["not-a-flag"]
    table.write_text(json.dumps(doc))
    state = defaults_state()
    assert not state.in_use and "best_flags are not a list of flags" in (state.warning or "")
