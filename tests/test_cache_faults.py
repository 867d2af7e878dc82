"""Damaged and read-only kernel caches, with real compiles and real runs (no mocks of IREE):

- an entry missing any part (configs/, compile_command.sh, a meta.json that is `null` or a list) is rebuilt, and a
  spec variant rebuilt that way is still judged "applied";
- a truncated reproducer input is written again, and the stored reproducer command runs;
- a read-only cache (a real read-only bind mount) serves hits with no error and compiles misses into an overlay;
- a cache root that cannot be created is a one-line usage error (exit 2) from boo-tui and boo-driver.
"""
from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from boo_engine.commands import parse_command
from boo_engine.compile.cache import KernelCache
from boo_engine.compile.pool import compile_signature, lookup_cached
from boo_engine.errors import BooError
from boo_engine.targets import parse_target
from boo_engine.variants import BASELINE, Variant, preflight_variant, spec_applied
from boo_engine.variants.best import best_variant

ROOT = Path(__file__).resolve().parents[1]
FAST = ROOT / "tuning_specs" / "cpu_gemm_256x512x512_fast.mlir"
BIG = "gemm --a_w 256 --a_h 512 --b_w 512 -F 1"
SMALL = "gemm -k 16 -m 32 -n 16"
OTHER = "gemm -k 16 -m 24 -n 16"

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module", autouse=True)
def _spec_cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("BOO_SPEC_CACHE_DIR", str(tmp_path_factory.mktemp("linked")))
    yield
    mp.undo()


def _fast() -> Variant:
    v = Variant(name="fast", tuning_specs=(str(FAST),))
    preflight_variant(v)
    return v


def _env(cache_dir: Path | str) -> dict[str, str]:
    e = dict(os.environ)
    e["BOO_CACHE_DIR"] = str(cache_dir)
    e.pop("BOO_DB", None)
    return e


def _module(result: dict) -> Path:
    """The kernel.vmfb a result measured, from its reproducer command."""
    return Path(next(a for a in shlex.split(result["reproducer"]) if a.startswith("--module="))[len("--module="):])


def boo_tui(args, env, cwd, timeout=600):
    return subprocess.run([sys.executable, "-m", "boo_tui", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def boo_driver(args, env, cwd, timeout=600):
    return subprocess.run([sys.executable, "-m", "boo_engine.cli.driver", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


# ---- damaged entries ------------------------------------------------------------------------------------------
def _del_configs(d: Path) -> None:
    shutil.rmtree(d / "configs")


def _meta_null(d: Path) -> None:
    (d / "meta.json").write_text("null")


def _meta_list(d: Path) -> None:
    (d / "meta.json").write_text("[]")


def _meta_bad_type(d: Path) -> None:
    meta = json.loads((d / "meta.json").read_text())
    (d / "meta.json").write_text(json.dumps(dict(meta, num_dispatches="1")))


def _del_command(d: Path) -> None:
    (d / "compile_command.sh").unlink()


DAMAGES = [_del_configs, _meta_null, _meta_list, _meta_bad_type, _del_command]


@pytest.fixture(scope="module")
def spec_cache(tmp_path_factory):
    cache = KernelCache(tmp_path_factory.mktemp("spec-kernels"))
    base = compile_signature(parse_command(BIG), "cpu", BASELINE, cache=cache)
    return cache, base


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda f: f.__name__)
def test_a_damaged_spec_entry_is_rebuilt_and_still_applied(spec_cache, damage):
    cache, base = spec_cache
    sig, fast = parse_command(BIG), _fast()
    art = compile_signature(sig, "cpu", fast, cache=cache)
    assert spec_applied(art.configs_dir, base.configs_dir, fast.tuning_specs).applied
    damage(Path(art.dir))
    assert lookup_cached(sig, "cpu", fast, cache=KernelCache(cache.root)) is None, "a damaged entry is no hit"
    again = compile_signature(sig, "cpu", fast, cache=KernelCache(cache.root))
    assert not again.cache_hit and again.key == art.key
    check = spec_applied(again.configs_dir, base.configs_dir, fast.tuning_specs)
    assert check.applied, check.detail
    assert compile_signature(sig, "cpu", fast, cache=KernelCache(cache.root)).cache_hit


@pytest.mark.parametrize("damage", [_del_configs, _meta_null], ids=lambda f: f.__name__)
def test_a_run_over_a_damaged_entry_rebuilds_it_and_reports_the_spec_applied(tmp_path, damage):
    env = _env(tmp_path / "cache")
    args = [BIG, "--variant", f"fast={FAST}", "--backend", "iree", "--iter", "5", "--no-numerics",
            "--db", str(tmp_path / "r.db")]
    first = boo_tui(args + ["--export", "a.json"], env, tmp_path)
    assert first.returncode == 0, first.stderr
    fast = next(r for r in json.loads((tmp_path / "a.json").read_text())["results"] if r["variant"] == "fast")
    assert not fast["error"] and fast["compile"]["spec_applied"] is True
    damage(_module(fast).parent)
    second = boo_tui(args + ["--export", "b.json"], env, tmp_path)
    assert second.returncode == 0, second.stderr
    assert "internal error" not in second.stderr and "not applied" not in second.stderr
    results = json.loads((tmp_path / "b.json").read_text())["results"]
    fast = next(r for r in results if r["variant"] == "fast")
    assert fast["status"] == "done" and not fast["error"], fast["error"]
    assert fast["compile"]["spec_applied"] is True and fast["compile"]["cache_hit"] is False  # rebuilt


def test_a_truncated_input_is_rewritten_and_the_reproducer_runs(tmp_path):
    env = _env(tmp_path / "cache")
    args = [SMALL, "--backend", "iree", "--iter", "5", "--db", str(tmp_path / "r.db")]
    assert boo_tui(args + ["--export", "a.json"], env, tmp_path).returncode == 0
    repro = json.loads((tmp_path / "a.json").read_text())["results"][0]["reproducer"]
    npy = Path(next(a for a in shlex.split(repro) if a.startswith("--input=@"))[len("--input=@"):])
    whole = npy.read_bytes()
    npy.write_bytes(whole[: len(whole) - 7])
    p = boo_tui(args + ["--export", "b.json"], env, tmp_path)
    assert p.returncode == 0, p.stderr
    assert npy.read_bytes() == whole
    repro = json.loads((tmp_path / "b.json").read_text())["results"][0]["reproducer"]
    run = subprocess.run(shlex.split(repro) + ["--benchmark_repetitions=1", "--benchmark_min_time=1x"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr


# ---- read-only caches -----------------------------------------------------------------------------------------
@contextlib.contextmanager
def read_only_view(src: Path):
    """`src` seen through a REAL read-only bind mount (root cannot write through it either)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a read-only bind mount needs root")
    view = Path("/tmp") / f"boo-ro-{uuid.uuid4().hex[:8]}"
    view.mkdir()
    try:
        for cmd in (["mount", "--bind", str(src), str(view)], ["mount", "-o", "remount,ro,bind", str(view)]):
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                subprocess.run(["umount", str(view)], capture_output=True)
                pytest.skip(f"cannot make a read-only bind mount here: {p.stderr.strip()}")
        with pytest.raises(OSError):
            (view / "probe").write_text("x")
        yield view
    finally:
        subprocess.run(["umount", str(view)], capture_output=True)
        view.rmdir()


def test_a_read_only_cache_serves_hits_and_compiles_misses_into_the_overlay(tmp_path):
    warm = tmp_path / "warm"
    small = parse_command(SMALL)
    best = best_variant(small, parse_target("cpu"))   # the column checked below, as the run resolves it
    compile_signature(small, "cpu", best, cache=KernelCache(warm))  # no reproducer inputs in it
    before = sorted(str(p.relative_to(warm)) for p in warm.rglob("*"))
    with read_only_view(warm) as ro:
        cache = KernelCache(ro)
        assert cache.lower == ro.resolve() and cache.root != ro.resolve() and cache.notice
        assert lookup_cached(small, "cpu", best, cache=cache) is not None

        overlay = tmp_path / "mine"
        p = boo_tui([SMALL, OTHER, "--backend", "iree", "--iter", "5", "--cache-dir", str(overlay),
                     "--db", str(tmp_path / "r.db"), "--export", "r.json"], _env(ro), tmp_path)
        assert p.returncode == 0, p.stderr
        assert "Read-only" not in p.stderr and "internal error" not in p.stderr
        assert p.stderr.count("is read-only") == 1, p.stderr
        results = {r["command"]: r for r in json.loads((tmp_path / "r.json").read_text())["results"]
                   if r["variant"] == "best"}
        hit, miss = results[SMALL], results[OTHER]
        assert hit["status"] == miss["status"] == "done" and not hit["error"] and not miss["error"]
        assert hit["compile"]["cache_hit"] and str(_module(hit)).startswith(str(ro))
        assert not miss["compile"]["cache_hit"] and str(_module(miss)).startswith(str(overlay.resolve()))
        # the hit's reproducer inputs could not go beside its read-only entry: they are in the overlay
        assert str(overlay.resolve()) in hit["reproducer"] and str(ro) in hit["reproducer"]

        # no --cache-dir: a private temporary overlay, said once
        p = boo_tui([SMALL, "--backend", "iree", "--iter", "5", "--db", str(tmp_path / "r.db"),
                     "--export", "s.json"], _env(ro), tmp_path)
        assert p.returncode == 0, p.stderr
        said = " ".join(p.stderr.split())  # rich wraps long lines
        assert said.count("is read-only") == 1 and "(deleted at exit)" in said, p.stderr
        p = boo_driver([*SMALL.split(), "--iter", "5", "--db", str(tmp_path / "r.db")], _env(ro), tmp_path)
        assert p.returncode == 0 and ">>> min=" in p.stdout, p.stderr
    assert sorted(str(p.relative_to(warm)) for p in warm.rglob("*")) == before, "the read-only cache was written"


# ---- unusable roots -------------------------------------------------------------------------------------------
def test_an_uncreatable_cache_root_is_a_usage_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    bad = blocker / "kernels"
    with pytest.raises(BooError, match="cannot be created"):  # CacheRootError: a usage error
        KernelCache(bad)
    for run, args in ((boo_tui, [SMALL, "--export", "x.csv", "--cache-dir", str(bad)]),
                      (boo_tui, [SMALL, "--export", "x.csv"]),
                      (boo_driver, [*SMALL.split(), "--cache-dir", str(bad)]),
                      (boo_driver, [*SMALL.split()]),
                      (boo_driver, [*SMALL.split(), "--preload", "--cache-dir", str(bad)])):
        p = run(args + ["--db", str(tmp_path / "r.db")], _env(bad), tmp_path)
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert p.returncode == 2, (args, p.returncode, p.stderr)
        assert len(lines) == 1 and str(bad) in lines[0] and "cannot be created" in lines[0], p.stderr
