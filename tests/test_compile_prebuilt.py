"""A cache filled on one machine serves another that has no compiler (a lent GPU box: the compiler wheel is too big
to carry there, and its torch is another version): kernels resolve through the prebuilt index, iree.compiler is
never imported, a missing kernel fails in one line, and a variant's files count by content, not by path."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from boo_engine.commands import parse_command
from boo_engine.compile.cache import KernelCache
from boo_engine.compile.pool import compile_signature, lookup_cached
from boo_engine.variants import Variant

REPO = Path(__file__).resolve().parent.parent
SPEC = REPO / "tuning_specs" / "gfx942_gemm_f16_128x256x256.mlir"
GEMM = "gemmfp16 --a_w 256 --a_h 128 --b_w 256"
TARGET = "hip:gfx942"   # cross-compiled here; its identity does not depend on this host

#: what the child process runs first: iree.compiler cannot be imported (as on a machine without the wheel)
HIDE_COMPILER = textwrap.dedent("""
    import sys

    class _NoCompiler:
        def find_spec(self, name, path=None, target=None):
            if name == "iree.compiler" or name.startswith("iree.compiler."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, _NoCompiler())
""")


def _without_compiler(tmp_path: Path, script: str) -> dict:
    """Run `script` in a Python that has no iree.compiler and no iree-compile on PATH; it prints one JSON line."""
    shim = tmp_path / "shim"
    shim.mkdir(exist_ok=True)
    (shim / "sitecustomize.py").write_text(HIDE_COMPILER)
    path = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                           if d and not (Path(d) / "iree-compile").exists())
    env = {**os.environ, "PATH": path, "PYTHONPATH": os.pathsep.join([str(shim), str(REPO)])}
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_a_variant_file_counts_by_content_not_by_path(tmp_path):
    """A tune's candidate written under another --out (or a variants file on another machine) is the same kernel."""
    cache = KernelCache(tmp_path / "cache")
    sig = parse_command(GEMM)
    here, there = tmp_path / "a" / "spec.mlir", tmp_path / "b" / "elsewhere.mlir"
    for p in (here, there):
        p.parent.mkdir()
        shutil.copy(SPEC, p)
    built = compile_signature(sig, TARGET, Variant(name="s", tuning_specs=(str(here),)), cache=cache)
    assert not built.cache_hit and f"--iree-codegen-tuning-spec-path={here}" in built.command
    found = lookup_cached(sig, TARGET, Variant(name="s", tuning_specs=(str(there),)), cache=KernelCache(cache.root))
    assert found is not None and found.key == built.key
    there.write_text(SPEC.read_text().replace("[128]", "[64]"))   # other content: another kernel
    assert lookup_cached(sig, TARGET, Variant(name="s", tuning_specs=(str(there),)),
                         cache=KernelCache(cache.root)) is None


def test_without_a_compiler_the_cache_alone_serves(tmp_path):
    cache_dir = tmp_path / "cache"
    sig = parse_command(GEMM)
    base = compile_signature(sig, TARGET, cache=KernelCache(cache_dir))
    spec = compile_signature(sig, TARGET, Variant(name="s", tuning_specs=(str(SPEC),)), cache=KernelCache(cache_dir))
    moved = tmp_path / "carried" / "spec.mlir"
    moved.parent.mkdir()
    shutil.copy(SPEC, moved)
    out = _without_compiler(tmp_path, textwrap.dedent(f"""
        import json, sys
        import boo_engine.compile.cache_records as cache_mod
        cache_mod.torch_version = lambda: "2.11.0+cu130"   # the other machine's torch: the index misses there
        from boo_engine.commands import parse_command
        from boo_engine.iree_tools import compiler_here
        from boo_engine.compile.cache import KernelCache
        from boo_engine.compile.pool import compile_signature, lookup_cached
        from boo_engine.errors import CompileError
        from boo_engine.variants import Variant, preflight_variant

        cache = KernelCache({str(cache_dir)!r})
        sig = parse_command({GEMM!r})
        v = Variant(name="s", tuning_specs=({str(moved)!r},))
        preflight_variant(v, {TARGET!r})   # nothing to check with: skipped, not failed
        base = compile_signature(sig, {TARGET!r}, cache=cache)
        spec = compile_signature(sig, {TARGET!r}, v, cache=cache)
        looked = lookup_cached(sig, {TARGET!r}, v, cache=cache)
        try:
            compile_signature(parse_command("gemmfp16 --a_w 256 --a_h 128 --b_w 128"), {TARGET!r}, cache=cache)
            missing = None
        except CompileError as e:
            missing = str(e)
        print(json.dumps({{"here": compiler_here(), "base": [base.key, base.cache_hit], "spec": spec.key,
                          "looked": looked.key if looked else None, "missing": missing,
                          "imported": "iree.compiler" in sys.modules}}))
    """))
    assert out["here"] is False and out["imported"] is False
    assert out["base"] == [base.key, True]
    assert out["spec"] == out["looked"] == spec.key != base.key
    missing = out["missing"]
    assert missing and "\n" not in missing
    assert "gemm_float16_forward_256x128x128" in missing and "no iree-compile is installed here" in missing
    assert f"--target {TARGET}" in missing


def test_a_cuda_tune_winner_is_what_tuned_toml_builds(tmp_path):
    """IREE 3.13's cuda pipeline ignores tuning specs, so a cuda candidate is a substituted dispatch. The tuned.toml
    a tune writes for it names that dispatch for its kernel, and builds the very kernel the candidate built (the
    same cache entry: measured on a GPU box from a cache filled here, it must not need a compiler)."""
    from boo_engine.tune.records import IMPROVED, Tried, TunedKernel
    from boo_engine.tune.report import write_outputs
    from boo_engine.tune.space import Candidate, GlobalChoice
    from boo_engine.variants import load_variants_file
    from boo_engine.variants.root_op import _dispatch_name, read_root

    target, cache = "cuda:sm_80", KernelCache(tmp_path / "cache")
    sig = parse_command(GEMM)
    base = compile_signature(sig, target, cache=cache)
    config = sorted(Path(base.configs_dir).glob("*.mlir"))[0]
    exe, text = _dispatch_name(config.name), config.read_text()
    cand_file = tmp_path / "tune" / "candidates" / "k1.mlir"
    cand_file.parent.mkdir(parents=True)
    cand_file.write_text(text)
    cand = Variant(name="t-k1", substitutions=(("source", exe, str(cand_file)),), kernels=(sig.func_name,))
    built = compile_signature(sig, target, cand, cache=cache)
    root = read_root(base.configs_dir)
    assert root is not None and root.dispatch == exe
    params = Candidate(sig.func_name, GlobalChoice("default"), root, tiles={"workgroup": [64, 64, 0]}).params
    best = Tried(sig.func_name, "k1", params=params, variant=cand.name, spec=text, ratio=0.9, ci_low=0.88, ci_high=0.92)
    kernel = TunedKernel(func_name=sig.func_name, command=GEMM, status=IMPROVED, baseline_us=100.0, best_key="k1",
                         best_us=90.0, ratio=0.9, ci_low=0.88, ci_high=0.92, tried=[best])
    out = tmp_path / "out"
    write_outputs(out, {sig.func_name: kernel}, {}, target=target, settings={})
    (tuned,) = load_variants_file(out / "tuned.toml")
    assert tuned.kernel_substitutions == ((sig.func_name, "source", exe, str(out / f"tuned.{sig.func_name}.mlir")),)
    assert (out / f"tuned.{sig.func_name}.mlir").read_text() == text
    found = lookup_cached(sig, target, tuned, cache=KernelCache(cache.root))
    assert found is not None and found.key == built.key
    # the kernel's own substitution is for that kernel only
    other = parse_command("gemmfp16 --a_w 128 --a_h 128 --b_w 128")
    assert tuned.flags_for(other.func_name) == [] and tuned.substitutions_for(other.func_name) == []


def test_an_offline_tune_compiles_what_the_live_one_proposes(tmp_path):
    """The GPU box measures candidates compiled here: the offline tune must propose exactly the live search's
    first batch (budget <= batch). The live search used to ask half its batch (7, 4, 2, 1 for 14), so only the
    first proposals matched and the GPU found 8 of 16 candidates missing from the cache."""
    import sqlite3

    from boo_engine.tune.offline import propose, space_for
    from boo_engine.tune.space import GlobalChoice
    from boo_engine.variants.root_op import read_root

    command = "gemm --a_w 64 --a_h 128 --b_w 128"
    cache, db = tmp_path / "cache", tmp_path / "t.db"
    p = subprocess.run([sys.executable, "-c", "import sys; from boo_tui.cli import main; sys.exit(main())", "tune",
                        command, "--budget", "8", "--batch", "8", "--out", str(tmp_path / "out"), "--db", str(db),
                        "--cache-dir", str(cache), "--final-time", "0.2"],
                       capture_output=True, text=True, timeout=600, cwd=REPO)
    assert p.returncode == 0, p.stderr[-2000:]
    rows = [json.loads(r[0]) | {"key": r[1]} for r in
            sqlite3.connect(db).execute("SELECT params, key FROM tune_candidates ORDER BY rowid")]
    live = [r["key"] for r in rows if r.get("tiles")]
    sig = parse_command(command)
    root = read_root(compile_signature(sig, "cpu", cache=KernelCache(cache)).configs_dir)
    assert root is not None
    offline = propose(space_for(root, "cpu"), sig.func_name, GlobalChoice("default"), 8 - (len(rows) - len(live)),
                      0, 8)
    # as sets: the tune stores each candidate when its compile and measurement end, in an order load changes (a
    # suite run stored 9af6, aa6c, 190a, a306, 8199 where a quiet run stored 9af6, 8199, aa6c, 190a, a306)
    assert len(live) >= 4 and sorted(live) == sorted(c.key for c in offline)


def test_boos_build_carried_to_a_machine_without_compiler_or_turbine(tmp_path, monkeypatch):
    """BOO's build of a kernel, cross-compiled here with iree-turbine, resolves on a machine with neither the
    compiler nor iree-turbine (a lent GPU box): the prebuilt index keys BOO's build without where its MLIR came
    from, as it takes no compiler or torch version either."""
    import dataclasses

    import pytest

    from boo_engine.compile.turbine import turbine_version
    from boo_engine.targets import parse_target

    if turbine_version() is None:
        pytest.skip("iree-turbine is not installed")
    cache_dir = tmp_path / "cache"
    target = dataclasses.replace(parse_target(TARGET), build="boo")
    built = compile_signature(parse_command(GEMM), target, cache=KernelCache(cache_dir))
    assert built.build.startswith("boo: iree-turbine") and "--iree-opt-level=O3" in built.command
    script = textwrap.dedent(f"""
        import dataclasses, json
        from boo_engine.commands import parse_command
        from boo_engine.compile.cache import KernelCache
        from boo_engine.compile.pool import compile_signature
        from boo_engine.compile.turbine import turbine_version
        from boo_engine.targets import parse_target
        target = dataclasses.replace(parse_target({TARGET!r}), build="boo")
        art = compile_signature(parse_command({GEMM!r}), target, cache=KernelCache({str(cache_dir)!r}))
        print(json.dumps({{"key": art.key, "turbine": turbine_version()}}))
    """)
    monkeypatch.setenv("BOO_TURBINE_DIR", str(tmp_path / "none"))   # (what _without_compiler's child sees)
    assert _without_compiler(tmp_path, script) == {"key": built.key, "turbine": None}


def test_compile_only_fills_what_a_run_then_measures_without_a_compiler(tmp_path, cli_env):
    """`--compile-only` compiled our build of the baseline while a run measures BOO's build of it: on the lent GPU box
    (no compiler) every baseline kernel of the sample file then failed "not in the kernel cache" beside a full best
    column. What --compile-only fills here, a run with the same options finds there, every column."""
    cache, db = tmp_path / "cache", tmp_path / "r.db"
    cmd = "gemm -m 8 -n 32 -k 32"
    env = {**cli_env, "BOO_CACHE_DIR": str(cache)}
    p = subprocess.run([sys.executable, "-m", "boo_tui", cmd, "--compile-only"], env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    out = _without_compiler(tmp_path, textwrap.dedent(f"""
        import json, os, subprocess, sys
        os.environ["BOO_CACHE_DIR"] = {str(cache)!r}
        from boo_engine.iree_tools import compiler_here
        p = subprocess.run([sys.executable, "-m", "boo_tui", {cmd!r}, "--headless", "--iter", "20", "--min-time",
                            "0.02", "--db", {str(db)!r}, "--backend", "iree"], capture_output=True, text=True)
        print(json.dumps({{"here": compiler_here(), "code": p.returncode, "out": p.stdout + p.stderr}}))
    """))
    assert out["here"] is False
    assert out["code"] == 0 and "not in the kernel cache" not in out["out"], out["out"][-3000:]
    assert out["out"].count("done ") == 2, out["out"][-3000:]    # the baseline (BOO's build) and the best column
