"""Variant parsing (--variant, TOML, BOO_TUNING_SPEC_PATH, build_variants), spec pre-flight with the real iree-opt,
and linking several specs with IREE's own link pass. No kernel compiles here (see test_specs.py)."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from boo_engine.errors import VariantError
from boo_engine.variants import (
    BASELINE,
    DUMP_MANIFEST,
    SPEC_MARKER,
    Variant,
    build_variants,
    load_variants_file,
    merged_spec_path,
    parse_variant_arg,
    preflight_spec,
    preflight_variant,
    spec_applied,
    spec_has_marker,
    substitutions_from_dir,
    variant_from_env,
)

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "tuning_specs"
FAST = SPECS / "cpu_gemm_256x512x512_fast.mlir"
NOTHING = SPECS / "cpu_matches_nothing.mlir"


@pytest.fixture(autouse=True)
def _spec_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BOO_SPEC_CACHE_DIR", str(tmp_path / "linked"))


def _one_line(e: pytest.ExceptionInfo) -> str:
    msg = str(e.value)
    assert "\n" not in msg, msg
    return msg


# ---- --variant ---------------------------------------------------------------------------------------------

def test_spec_form_resolves_relative_path(monkeypatch):
    monkeypatch.chdir(ROOT)
    v = parse_variant_arg("fast=tuning_specs/cpu_gemm_256x512x512_fast.mlir")
    assert v == Variant(name="fast", tuning_specs=(str(FAST),))
    assert os.path.isabs(v.tuning_specs[0])
    assert v.compile_flags() == [f"--iree-codegen-tuning-spec-path={FAST}"]


def test_spec_form_without_name_takes_the_stem():
    v = parse_variant_arg(str(FAST))
    assert v.name == "cpu_gemm_256x512x512_fast"


def test_flags_form_is_shell_split():
    v = parse_variant_arg("im2col='--iree-global-opt-use-im2col-for-convs --iree-opt-data-tiling=false'")
    assert v.name == "im2col"
    assert v.flags == ("--iree-global-opt-use-im2col-for-convs", "--iree-opt-data-tiling=false")
    assert v.compile_flags()[-2:] == list(v.flags)
    v2 = parse_variant_arg('dt="--iree-opt-data-tiling"')
    assert v2.flags == ("--iree-opt-data-tiling",)


def test_flags_form_without_name():
    v = parse_variant_arg("--iree-opt-data-tiling")
    assert v.name == "opt-data-tiling" and v.flags == ("--iree-opt-data-tiling",)


def test_mixed_spec_and_flag():
    v = parse_variant_arg(f"mix={FAST} --iree-opt-data-tiling=false")
    assert v.tuning_specs == (str(FAST),) and v.flags == ("--iree-opt-data-tiling=false",)


@pytest.mark.parametrize("text, words", [
    ("", "empty"),
    ("x=", "nothing after"),
    ("x=notaflag", "neither a tuning spec"),
    ("x=/no/such/dir/", "no such directory"),
    ("x='--unterminated", "quotation"),
    ("x=variants.toml", "--variants-file"),
])
def test_bad_variant_args(text, words):
    with pytest.raises(VariantError) as e:
        parse_variant_arg(text)
    assert words in _one_line(e)


def test_bad_name_is_refused():
    with pytest.raises(VariantError) as e:
        parse_variant_arg(f"has space={FAST}")  # not a name: the whole text is then a path, which is not a spec
    _one_line(e)


def test_formulation_form():
    v = parse_variant_arg("fwd=formulation=fwdconv")
    assert v == Variant(name="fwd", formulation="fwdconv") and not v.is_baseline
    assert v.compile_flags() == []   # not a compiler flag: it changes what is exported
    assert parse_variant_arg("formulation=matmul") == Variant(name="matmul", formulation="matmul")
    mixed = parse_variant_arg("f='formulation=fwdconv --iree-global-opt-use-im2col-for-convs'")
    assert mixed.formulation == "fwdconv" and mixed.flags == ("--iree-global-opt-use-im2col-for-convs",)
    assert parse_variant_arg("d=formulation=default").formulation == "default"   # named on purpose: not baseline
    assert not parse_variant_arg("d=formulation=default").is_baseline


@pytest.mark.parametrize("text, words", [
    ("f=formulation=fwdcov", "unknown formulation 'fwdcov' (kernels have: default, fwdconv, matmul, mixed, in_dtype)"),
    ("f=formulation=", "unknown formulation ''"),
    ("f='formulation=fwdconv formulation=matmul'", "formulation given twice"),
])
def test_bad_formulation_is_one_line(text, words):
    with pytest.raises(VariantError) as e:
        parse_variant_arg(text)
    assert words in _one_line(e)


def test_formulation_in_description_and_key():
    v = Variant(name="fwd", flags=("--iree-opt-data-tiling",), formulation="fwdconv")
    assert v.describe()["formulation"] == "fwdconv"
    assert Variant.from_description(v.describe()) == v
    assert Variant.from_description(json.loads(json.dumps(v.describe()))) == v
    assert "formulation" not in BASELINE.describe() and Variant.from_description(BASELINE.describe()) == BASELINE
    keys = {Variant(formulation=f).key_material() for f in ("fwdconv", "matmul")}
    assert len(keys) == 2 and BASELINE.key_material() not in keys
    # "default" builds the very kernel the baseline builds, so it shares its cache entry
    assert Variant(name="d", formulation="default").key_material() == BASELINE.key_material()


# ---- build_variants ----------------------------------------------------------------------------------------

def test_build_variants_baseline_first_and_no_baseline():
    vs = build_variants([f"a={FAST}", "b=--iree-opt-data-tiling"], [])
    assert [v.name for v in vs] == ["baseline", "a", "b"] and vs[0] is BASELINE
    assert [v.name for v in build_variants([f"a={FAST}"], None, include_baseline=False)] == ["a"]


def test_build_variants_duplicate_names(tmp_path):
    with pytest.raises(VariantError) as e:
        build_variants([f"a={FAST}", "a=--iree-opt-data-tiling"], [])
    assert "'a' is given twice" in _one_line(e)
    toml = tmp_path / "v.toml"
    toml.write_text('[a]\nflags = "--iree-opt-data-tiling"\n')
    with pytest.raises(VariantError):
        build_variants([f"a={FAST}"], [str(toml)])
    with pytest.raises(VariantError) as e:
        build_variants(["baseline=--iree-opt-data-tiling"], [])
    assert "reserved" in _one_line(e)


# ---- BOO_TUNING_SPEC_PATH ----------------------------------------------------------------------------------

def test_env_variable():
    assert variant_from_env({}) is None
    assert variant_from_env({"BOO_TUNING_SPEC_PATH": "  "}) is None
    v = variant_from_env({"BOO_TUNING_SPEC_PATH": str(FAST)})
    assert v == Variant(name="cpu_gemm_256x512x512_fast", tuning_specs=(str(FAST),))
    with pytest.raises(VariantError) as e:
        variant_from_env({"BOO_TUNING_SPEC_PATH": "/nope/spec.mlir"})
    assert "BOO_TUNING_SPEC_PATH" in _one_line(e) and "/nope/spec.mlir" in str(e.value)


def test_env_variable_from_os_environ(monkeypatch):
    monkeypatch.setenv("BOO_TUNING_SPEC_PATH", str(NOTHING))
    assert variant_from_env().tuning_specs == (str(NOTHING),)


# ---- TOML --------------------------------------------------------------------------------------------------

def test_toml_every_key_and_relative_paths(tmp_path):
    (tmp_path / "specs").mkdir()
    shutil.copy(FAST, tmp_path / "specs" / "fast.mlir")
    shutil.copy(NOTHING, tmp_path / "specs" / "none.mlir")
    (tmp_path / "edited.mlir").write_text("hal.executable public @main$async_dispatch_0 {}\n")
    f = tmp_path / "variants.toml"
    f.write_text("""
[fast]
specs = ["specs/fast.mlir", "specs/none.mlir"]
[tiling]
flags = "--iree-opt-data-tiling --iree-llvmcpu-enable-ukernels=none"
[listflags]
flags = ["--iree-opt-data-tiling=false"]
[edited]
substitute_sources = {"main$async_dispatch_0" = "edited.mlir"}
[pre]
preprocess = "builtin.module(canonicalize)"
[form]
formulation = "fwdconv"
spec = []
""".replace("spec = []\n", ""))
    vs = load_variants_file(f)
    assert [v.name for v in vs] == ["fast", "tiling", "listflags", "edited", "pre", "form"]
    assert vs[5] == Variant(name="form", formulation="fwdconv")
    assert vs[0].tuning_specs == (str(tmp_path / "specs/fast.mlir"), str(tmp_path / "specs/none.mlir"))
    assert vs[1].flags == ("--iree-opt-data-tiling", "--iree-llvmcpu-enable-ukernels=none")
    assert vs[2].flags == ("--iree-opt-data-tiling=false",)
    assert vs[3].substitutions == (("source", "main$async_dispatch_0", str(tmp_path / "edited.mlir")),)
    assert vs[4].compile_flags() == ["--iree-hal-preprocess-executables-with=builtin.module(canonicalize)"]


@pytest.mark.parametrize("body, words", [
    ("[a]\nspecz = ['x.mlir']\n", "unknown key 'specz'"),
    ("[a]\nflags = 3\n", "string or a list"),
    ("[a]\nflags = ['nodash']\n", "does not start with '-'"),
    ("a = 1\n", "expected a table"),
    ("[a]\n", "defines nothing"),
    ("[a\n", "variants file"),
    ("", "no variants"),
    ("[a]\nsubstitute_sources = 3\n", "must be a table"),
    ("[a]\nformulation = 3\n", "formulation must be a string"),
    ("[a]\nformulation = 'im2col'\n", "unknown formulation 'im2col'"),
    ("[a.kernels.k]\nformulation = 'fwdcov'\n", "kernels.k: unknown formulation 'fwdcov'"),
])
def test_toml_errors_name_the_file(tmp_path, body, words):
    f = tmp_path / "v.toml"
    f.write_text(body)
    with pytest.raises(VariantError) as e:
        load_variants_file(f)
    msg = _one_line(e)
    assert words in msg and str(f) in msg


def test_toml_missing_file(tmp_path):
    with pytest.raises(VariantError) as e:
        load_variants_file(tmp_path / "none.toml")
    assert "none.toml" in _one_line(e)


# ---- pre-flight --------------------------------------------------------------------------------------------

def test_shipped_specs_pass_preflight():
    specs = sorted(SPECS.glob("*.mlir"))
    assert len(specs) >= 4
    for s in specs:
        preflight_spec(s)
        first = s.read_text().splitlines()[0]
        assert first.startswith("//"), f"{s.name} must start with a comment saying what it matches"
        assert spec_has_marker(s), f"{s.name}: its actions must set the marker"


def _broken(tmp_path: Path, name: str, old: str, new: str) -> Path:
    text = FAST.read_text()
    assert old in text
    p = tmp_path / name
    p.write_text(text.replace(old, new))
    return p


def test_preflight_malformed_spec_gives_one_line_with_file_and_reason(tmp_path):
    p = _broken(tmp_path, "syntax.mlir", "transform.yield %res", "transform.yieldx %res")
    with pytest.raises(VariantError) as e:
        preflight_spec(p)
    msg = _one_line(e)
    assert msg.startswith(f"tuning spec {p}: line ") and "'transform.yieldx' is unknown" in msg


def test_preflight_missing_entry_point_attribute(tmp_path):
    p = _broken(tmp_path, "noattr.mlir", "attributes {iree_codegen.tuning_spec_entrypoint}", "")
    with pytest.raises(VariantError) as e:
        preflight_spec(p)
    assert "iree_codegen.tuning_spec_entrypoint" in _one_line(e)


def test_preflight_spec_that_iree_would_silently_ignore(tmp_path):
    """Neither the default-entrypoint module attribute nor an entry point: iree-opt and iree-compile accept it
    and apply nothing. Pre-flight must refuse it."""
    p = _broken(tmp_path, "silent.mlir", ", iree_codegen.tuning_spec_with_default_entrypoint", "")
    p.write_text(p.read_text().replace("attributes {iree_codegen.tuning_spec_entrypoint}", ""))
    with pytest.raises(VariantError) as e:
        preflight_spec(p)
    assert "no entry point" in _one_line(e)


def test_preflight_missing_and_garbage_files(tmp_path):
    with pytest.raises(VariantError) as e:
        preflight_spec(tmp_path / "missing.mlir")
    assert "missing.mlir" in _one_line(e) and "No such file" in str(e.value)
    g = tmp_path / "garbage.mlir"
    g.write_text("hello\n")
    with pytest.raises(VariantError) as e:
        preflight_spec(g)
    assert str(g) in _one_line(e)
    with pytest.raises(VariantError) as e:
        preflight_spec(tmp_path)
    assert "directory" in _one_line(e)


def test_preflight_variant_names_variant_and_checks_flags(tmp_path):
    preflight_variant(parse_variant_arg("ok=--iree-opt-data-tiling=false --iree-global-opt-use-im2col-for-convs"))
    with pytest.raises(VariantError) as e:
        preflight_variant(parse_variant_arg("typo=--iree-opt-data-tilling"))
    msg = _one_line(e)
    assert msg.startswith("variant typo:") and "--iree-opt-data-tilling" in msg
    with pytest.raises(VariantError) as e:
        preflight_variant(parse_variant_arg("out=--compile-to=flow"))
    assert "controls the output" in _one_line(e)
    bad = _broken(tmp_path, "bad.mlir", "transform.yield %res", "transform.yieldx %res")
    with pytest.raises(VariantError) as e:
        preflight_variant(Variant(name="b", tuning_specs=(str(bad),)))
    assert _one_line(e).startswith(f"variant b: tuning spec {bad}")
    with pytest.raises(VariantError) as e:
        preflight_variant(Variant(name="p", preprocess="no-such-tool-xyz --arg"))
    assert "not on PATH" in _one_line(e)


# ---- several specs -----------------------------------------------------------------------------------------

def test_several_specs_are_linked_into_one(tmp_path):
    v = Variant(name="two", tuning_specs=(str(NOTHING), str(FAST)))
    flags = v.compile_flags()
    assert len([f for f in flags if f.startswith("--iree-codegen-tuning-spec-path=")]) == 1
    linked = Path(flags[0].split("=", 1)[1])
    assert linked.parent == tmp_path / "linked"
    text = linked.read_text()
    preflight_spec(linked)  # a valid spec with an entry point
    # one foreach_match trying NOTHING's matcher first, then FAST's
    body = text[text.index("@__kernel_config"):]
    assert body.index("match_gemm_12345x678x91_f32") < body.index("match_gemm_256x512x512_f32")
    assert merged_spec_path(v.tuning_specs) == str(linked)  # content-addressed: made once


def test_linking_a_broken_spec_names_it(tmp_path):
    bad = _broken(tmp_path, "bad.mlir", "transform.yield %res", "transform.yieldx %res")
    with pytest.raises(VariantError) as e:
        Variant(name="two", tuning_specs=(str(FAST), str(bad))).compile_flags()
    assert str(bad) in _one_line(e)


# ---- dispatch folders (parsing only; the end-to-end compile is in test_variants_dispatches.py) ------------

def _exe(name: str, configured: bool) -> str:
    cfg = ' attributes {translation_info = #iree_codegen.translation_info<pipeline = #iree_cpu.pipeline<' \
          'DoubleTilingExpert>>}' if configured else ""
    return f"hal.executable public @{name} {{\n  // func{cfg}\n}}\n"


def test_dispatch_folder_without_manifest_substitutes_every_file(tmp_path):
    (tmp_path / "module_main$async_dispatch_0.mlir").write_text(_exe("main$async_dispatch_0", False))
    (tmp_path / "configured_module_main$async_dispatch_1.mlir").write_text(_exe("main$async_dispatch_1", True))
    (tmp_path / "my_edit.mlir").write_text(_exe("main$async_dispatch_2", True))  # kind from content
    v = parse_variant_arg(f"edited={tmp_path}/")
    assert v.substitutions == (
        ("configuration", "main$async_dispatch_1", str(tmp_path / "configured_module_main$async_dispatch_1.mlir")),
        ("source", "main$async_dispatch_0", str(tmp_path / "module_main$async_dispatch_0.mlir")),
        ("configuration", "main$async_dispatch_2", str(tmp_path / "my_edit.mlir")),
    )
    assert v.compile_flags()[0] == ("--iree-hal-substitute-executable-configuration=main$async_dispatch_1="
                                    f"{tmp_path / 'configured_module_main$async_dispatch_1.mlir'}")
    assert v.kernels == () and v.applies_to("anything")


def test_dispatch_folder_with_manifest_substitutes_only_edits(tmp_path):
    import hashlib

    src = tmp_path / "module_main$async_dispatch_0.mlir"
    cfg = tmp_path / "configured_module_main$async_dispatch_0.mlir"
    src.write_text(_exe("main$async_dispatch_0", False))
    cfg.write_text(_exe("main$async_dispatch_0", True))
    files = {f.name: {"sha256": hashlib.sha256(f.read_bytes()).hexdigest()} for f in (src, cfg)}
    (tmp_path / DUMP_MANIFEST).write_text(json.dumps({"func_name": "gemm_x", "files": files}))
    with pytest.raises(VariantError) as e:
        parse_variant_arg(f"e={tmp_path}/")
    assert "no file differs from the dump" in _one_line(e)
    src.write_text(src.read_text() + "// edited\n")
    v = parse_variant_arg(f"e={tmp_path}/")
    assert v.substitutions == (("source", "main$async_dispatch_0", str(src)),)
    assert v.kernels == ("gemm_x",) and v.applies_to("gemm_x") and not v.applies_to("gemm_y")
    cfg.write_text(cfg.read_text() + "// edited too\n")
    with pytest.raises(VariantError) as e:
        parse_variant_arg(f"e={tmp_path}/")
    assert "both source and configuration" in _one_line(e)


def test_dispatch_folder_errors(tmp_path):
    with pytest.raises(VariantError) as e:
        substitutions_from_dir(tmp_path)
    assert "holds no dispatch" in _one_line(e)
    (tmp_path / "x.mlir").write_text("module {}\n")
    with pytest.raises(VariantError) as e:
        substitutions_from_dir(tmp_path)
    assert "holds no hal.executable" in _one_line(e)


# ---- spec_applied without compiling (text-level rules; real compiles in test_specs.py) -------------------

def test_spec_applied_rules_on_text(tmp_path):
    base, var = tmp_path / "base", tmp_path / "var"
    base.mkdir(), var.mkdir()
    op = ('hal.executable public @main$async_dispatch_0 {{\n  %7 = linalg.matmul {{{attrs}lowering_config = '
          '#iree_cpu.lowering_config<distribution = [{d}, 0]>}} ins()\n}}\n')
    (base / "configured_module_main$async_dispatch_0.mlir").write_text(op.format(attrs="", d="64, 64"))
    # aliases are resolved before comparing: the same config printed through an alias is "unchanged"
    (var / "configured_module_main$async_dispatch_0.mlir").write_text(
        "#config = #iree_cpu.lowering_config<distribution = [64, 64, 0]>\n"
        "hal.executable public @main$async_dispatch_0 {\n  %7 = linalg.matmul {lowering_config = #config} ins()\n}\n")
    nomarker = tmp_path / "nomarker.mlir"
    nomarker.write_text(FAST.read_text().replace(f'    transform.annotate %op "{SPEC_MARKER}" : !transform.any_op\n', ""))
    assert not spec_applied(var, base, [str(nomarker)]).applied
    (var / "configured_module_main$async_dispatch_0.mlir").write_text(op.format(attrs="", d="128, 128"))
    check = spec_applied(var, base, [str(nomarker)])
    assert check.applied and check.dispatches == ("main$async_dispatch_0",)
    assert not spec_applied(var, None, [str(nomarker)]).applied       # [128, 128, 0] alone is not FAST's config
    assert not spec_applied(var, base, [str(FAST)]).applied          # FAST has the marker and none is there
    assert spec_applied(var, base, []).applied
    assert not spec_applied(tmp_path / "nothing", base, [str(FAST)]).applied


def test_preflight_refuses_a_spec_for_the_other_kind_of_target():
    gpu = ROOT / "tuning_specs" / "gfx942_gemm_f16_128x256x256.mlir"
    preflight_variant(Variant(name="g", tuning_specs=(str(gpu),)), "hip:gfx942")
    preflight_variant(Variant(name="c", tuning_specs=(str(FAST),)), "cpu")
    with pytest.raises(VariantError) as e:
        preflight_variant(Variant(name="g", tuning_specs=(str(gpu),)), "cpu")
    assert "GPU targets" in _one_line(e) and str(gpu) in str(e.value)
    with pytest.raises(VariantError) as e:
        preflight_variant(Variant(name="c", tuning_specs=(str(FAST),)), "hip:gfx942")
    assert "CPU targets" in _one_line(e)
