"""The kernel cache: hits without export, misses on every key change, corrupt entries rebuilt, concurrent
compiles of one kernel safe, failures and timeouts isolated. Real iree-compile runs throughout (tiny kernels)."""
from __future__ import annotations

import concurrent.futures
import json
import multiprocessing
import os
from pathlib import Path

import pytest

from boo_engine.commands import parse_command
from boo_engine.compile import export as export_mod
from boo_engine.compile.cache import KernelCache, valid_entries
from boo_engine.compile.pool import CompileCancelled, CompilePool, compile_flags, compile_signature, lookup_cached
from boo_engine.errors import CompileError
from boo_engine.targets import Target
from boo_engine.variants import BASELINE, Variant

GEMM = "gemm --a_w 4 --a_h 8 --b_w 4"
SPEC = """// matches no op: compiles and changes nothing{tag}
module attributes {{transform.with_named_sequence, iree_codegen.tuning_spec_with_default_entrypoint}} {{
  transform.named_sequence @match_nothing(%op: !transform.any_op {{transform.readonly}}) -> !transform.any_op {{
    transform.match.operation_name %op ["boo.no_such_op"] : !transform.any_op
    transform.yield %op : !transform.any_op
  }}
  transform.named_sequence @do_nothing(%op: !transform.any_op {{transform.readonly}}) {{
    transform.yield
  }}
  transform.named_sequence @__kernel_config(%root: !transform.any_op {{transform.consumed}}) -> !transform.any_op
      attributes {{iree_codegen.tuning_spec_entrypoint}} {{
    %res = transform.foreach_match in %root @match_nothing -> @do_nothing : (!transform.any_op) -> !transform.any_op
    transform.yield %res : !transform.any_op
  }}
}}
"""


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def first(root):
    """One kernel compiled cold into the module's cache."""
    return compile_signature(parse_command(GEMM), "cpu", cache=KernelCache(root))


def _no_export(*_a, **_k):
    raise AssertionError("a cache hit must not export")


def test_cold_compile_writes_the_documented_layout(first, root):
    d = Path(first.dir)
    assert not first.cache_hit and first.compile_seconds > 0
    assert d.parent == root / first.func_name and d.name == first.key[:16]
    assert (root / first.func_name / f"{first.func_name}.mlir").read_text().startswith("module")
    meta = json.loads((d / "meta.json").read_text())
    assert meta["key"] == first.key and meta["flags"] == first.flags and meta["compiler_version"]
    assert meta["num_dispatches"] == len(list((d / "configs").iterdir())) >= 1
    script = (d / "compile_command.sh").read_text()
    assert "iree-compile" in script and "--iree-hal-dump-executable-configurations-to=" in script
    assert not [p for p in d.parent.iterdir() if p.name.startswith((".tmp", ".trash"))]


def test_hit_from_a_fresh_cache_object_needs_no_export(first, root, monkeypatch):
    monkeypatch.setattr(export_mod, "export_mlir", _no_export)
    hit = compile_signature(parse_command(GEMM), "cpu", cache=KernelCache(root))
    assert hit.cache_hit and hit.key == first.key and hit.compile_seconds == 0.0
    assert lookup_cached(parse_command(GEMM), "cpu", cache=KernelCache(root)).key == first.key


def test_a_change_to_the_export_code_misses_the_index(first, root, monkeypatch, tmp_path):
    """The index hands a kernel out without exporting it: a fix in compile/export.py or lowering.py that changes
    a kernel's MLIR must miss it, or the kernel exported before the fix is served (a training batch_norm's
    3-output kernel was, after export.py stopped returning the running statistics)."""
    from boo_engine.compile import sources

    assert [p.name for p in sources.EXPORT_CODE] == ["export.py", "lowering.py"]
    assert all(p.is_file() for p in sources.EXPORT_CODE)
    fixed = tmp_path / "export.py"
    fixed.write_text(sources.EXPORT_CODE[0].read_text() + "\n# a fix\n")
    monkeypatch.setattr(sources, "EXPORT_CODE", (fixed, sources.EXPORT_CODE[1]))
    sources._source_digest.cache_clear()
    try:
        assert lookup_cached(parse_command(GEMM), "cpu", cache=KernelCache(root)) is None
    finally:
        sources._source_digest.cache_clear()


def test_compile_command_script_rebuilds_the_same_kernel(first):
    import subprocess

    vmfb = Path(first.vmfb_path)
    before = vmfb.read_bytes()
    vmfb.unlink()
    subprocess.run(["sh", str(Path(first.dir) / "compile_command.sh")], check=True, capture_output=True)
    assert vmfb.read_bytes() == before  # the recorded command is exact


def test_a_changed_flag_misses(first, root):
    other = compile_signature(parse_command(GEMM), "cpu", cache=KernelCache(root),
                              extra_flags=["--iree-opt-data-tiling"])
    assert not other.cache_hit and other.key != first.key and other.dir != first.dir


def test_compiler_runs_single_threaded_without_changing_the_key(first, root):
    # --mlir-disable-threading: how the compiler runs (faster on these one-op modules), not what it builds
    assert first.command.count("--mlir-disable-threading") == 1
    assert "--mlir-disable-threading" not in first.flags
    # a variant asking for threading back gets it, once (a flag given twice is an iree-compile error)
    threaded = compile_signature(parse_command(GEMM), "cpu", cache=KernelCache(root),
                                 extra_flags=["--mlir-disable-threading=false"])
    assert not threaded.cache_hit and not any(f == "--mlir-disable-threading" for f in threaded.command)


def test_compiler_version_is_in_the_key(first, root):
    fake = compile_signature(parse_command(GEMM), "cpu", cache=KernelCache(root, compiler_version="IREE 0.0 fake"))
    assert not fake.cache_hit and fake.key != first.key and fake.compiler_version == "IREE 0.0 fake"
    # and the real version still hits the original entry
    assert compile_signature(parse_command(GEMM), "cpu", cache=KernelCache(root)).key == first.key


def test_spec_content_change_with_same_path_misses(root, tmp_path):
    spec = tmp_path / "spec.mlir"
    spec.write_text(SPEC.format(tag=""))
    v = Variant(name="spec", tuning_specs=(str(spec),))
    sig = parse_command(GEMM)
    a = compile_signature(sig, "cpu", v, cache=KernelCache(root))
    assert compile_signature(sig, "cpu", v, cache=KernelCache(root)).cache_hit
    spec.write_text(SPEC.format(tag=" (edited)"))
    b = compile_signature(sig, "cpu", v, cache=KernelCache(root))
    assert not b.cache_hit and b.key != a.key


def test_target_identity_is_in_the_key(root):
    sig = parse_command(GEMM)
    cache = KernelCache(root)
    flags = compile_flags(sig, Target("cpu"))
    assert cache.key_for("m", flags, "cpu:A", BASELINE.key_material()) != cache.key_for(
        "m", flags, "cpu:B", BASELINE.key_material())


@pytest.mark.parametrize("damage", ["truncate", "flip", "meta"])
def test_corrupt_entry_is_rebuilt(damage, tmp_path):
    sig = parse_command("gemm --a_w 4 --a_h 4 --b_w 4")
    art = compile_signature(sig, "cpu", cache=KernelCache(tmp_path))
    vmfb, meta = Path(art.vmfb_path), Path(art.dir) / "meta.json"
    data = vmfb.read_bytes()
    if damage == "truncate":
        vmfb.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        vmfb.write_bytes(data[:100] + bytes([data[100] ^ 0xFF]) + data[101:])
    else:
        meta.write_text("{ not json")
    again = compile_signature(sig, "cpu", cache=KernelCache(tmp_path))
    assert not again.cache_hit and again.key == art.key
    assert vmfb.read_bytes() == data and json.loads(meta.read_text())["key"] == art.key


def test_compiler_error_keeps_stderr_and_command(tmp_path):
    with pytest.raises(CompileError) as ei:
        compile_signature(parse_command(GEMM), "cpu", cache=KernelCache(tmp_path),
                          extra_flags=["--iree-no-such-flag"])
    e = ei.value
    assert "Unknown command line argument" in e.stderr and "--iree-no-such-flag" in e.command
    assert "\n" not in str(e)
    func_dir = tmp_path / parse_command(GEMM).func_name
    assert not [p for p in func_dir.iterdir() if p.is_dir()]  # no half entry, no staging left


def test_bad_tuning_spec_fails_cleanly(tmp_path):
    spec = tmp_path / "bad.mlir"
    spec.write_text("this is not mlir")
    with pytest.raises(CompileError) as ei:
        compile_signature(parse_command(GEMM), "cpu", Variant(name="bad", tuning_specs=(str(spec),)),
                          cache=KernelCache(tmp_path))
    assert "tuning spec" in ei.value.stderr


def test_timeout_kills_the_compiler(tmp_path):
    with pytest.raises(CompileError, match="timed out"):
        compile_signature(parse_command("conv -n 1 -c 4 -H 8 -W 8 -k 4"), "cpu", cache=KernelCache(tmp_path),
                          timeout_s=0.05)


def _compile_in_child(root: str, barrier, out) -> None:
    barrier.wait()
    art = compile_signature(parse_command("gemm --a_w 4 --a_h 12 --b_w 4"), "cpu", cache=KernelCache(root))
    out.put((art.key, art.cache_hit))


def test_two_processes_compiling_one_kernel(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_compile_in_child, args=(str(tmp_path), barrier, out)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    results = [out.get(timeout=5) for _ in procs]
    assert all(p.exitcode == 0 for p in procs)
    assert results[0][0] == results[1][0]
    assert sorted(hit for _, hit in results) == [False, True]  # compiled once, the other waited and hit
    cache = KernelCache(tmp_path)
    entries = list(valid_entries(cache))
    assert len(entries) == 1
    func_dir = entries[0][2].parent
    assert [p.name for p in func_dir.iterdir() if p.is_dir()] == [entries[0][1][:16]]


def test_pool_reports_failures_and_cancels(tmp_path):
    cache = KernelCache(tmp_path)
    with CompilePool(workers=2, cache=cache, timeout_s=120) as pool:
        bad = pool.submit(parse_command(GEMM), "cpu", Variant(name="bad", flags=("--iree-no-such-flag",)))
        good = pool.submit(parse_command(GEMM), "cpu")
        assert good.result(timeout=120).num_dispatches >= 1
        with pytest.raises(CompileError) as ei:
            bad.result(timeout=120)
        assert "--iree-no-such-flag" in ei.value.command and ei.value.stderr
        # a cached kernel resolves without a worker
        assert pool.submit(parse_command(GEMM), "cpu").result(timeout=30).cache_hit
        slow = [pool.submit(parse_command(f"conv -n 2 -c 8 -H 16 -W 16 -k {k}"), "cpu") for k in (8, 9, 10)]
        pool.cancel_all()
        for f in slow:
            with pytest.raises((CompileCancelled, concurrent.futures.CancelledError)):
                f.result(timeout=30)
    assert not [p for p in tmp_path.rglob(".tmp-*")]


def test_cancel_mid_compile_leaves_no_staging_folder(tmp_path):
    """A compile killed while iree-compile writes into its staging folder: the folder goes with it (CI once
    found one left behind when a cancel landed mid-compile)."""
    import time

    cache = KernelCache(tmp_path)
    with CompilePool(workers=1, cache=cache, timeout_s=120) as pool:
        fut = pool.submit(parse_command("conv -n 2 -c 16 -H 32 -W 32 -k 16 -F 4"), "cpu")
        deadline = time.monotonic() + 120
        while not list(tmp_path.rglob(".tmp-*")) and not fut.done():
            assert time.monotonic() < deadline, "the compile never started"
            time.sleep(0.005)
        assert not fut.done(), "compiled before the cancel could land: make the kernel bigger"
        pool.cancel_all()
        with pytest.raises((CompileCancelled, concurrent.futures.CancelledError)):
            fut.result(timeout=30)
        assert not list(tmp_path.rglob(".tmp-*"))


def test_sweep_removes_only_dead_processes_leftovers(tmp_path):
    import subprocess

    from boo_engine.compile.procs import host_tag as _host_tag

    cache = KernelCache(tmp_path)
    func = "gemm_dummy"
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = _host_tag()
    d = cache.func_dir(func)
    d.mkdir(parents=True)
    keep = [f".tmp-0123456789abcdef-{os.getpid()}-{host}-x3",    # ours: live work
            f".tmp-0123456789abcdef-{os.getppid()}-{host}-x4",   # another live process
            f".tmp-0123456789abcdef-{dead.pid}-0badc0de-x5",     # another host's (a shared cache): not ours to judge
            "0123456789abcdef"]                                   # an entry
    for name in keep + [f".tmp-0123456789abcdef-{dead.pid}-{host}-x1", f".trash-0123456789abcdef-{dead.pid}-{host}-x2"]:
        (d / name).mkdir()
    assert cache.sweep_orphans(func) == 2
    assert sorted(p.name for p in d.iterdir()) == sorted(keep)
    # and a staging folder made now is named so that it can be swept the same way
    staging = cache.staging_dir(func, "f" * 64)
    assert staging.name.startswith(f".tmp-ffffffffffffffff-{os.getpid()}-{host}-")


def test_cache_on_zero_uses_a_private_temporary_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("BOO_CACHE_ON", "0")
    monkeypatch.setenv("BOO_CACHE_DIR", str(tmp_path / "shared"))
    c = KernelCache()
    assert c.temporary and not str(c.root).startswith(str(tmp_path)) and c.root.is_dir()
    monkeypatch.setenv("BOO_CACHE_ON", "1")
    assert KernelCache().root == (tmp_path / "shared").resolve()
    os.rmdir(c.root)


def test_compiler_crash_is_a_compile_error(tmp_path):
    """iree-compile 3.13 segfaults when substituting a CPU executable object (iree-facts.md): the caller
    survives and gets the signal, the stack dump and the command."""
    junk = tmp_path / "junk.o"
    junk.write_bytes(b"not an object file")
    with pytest.raises(CompileError) as ei:
        compile_signature(parse_command(GEMM), "cpu", cache=KernelCache(tmp_path / "c"),
                          extra_flags=[f"--iree-hal-substitute-executable-object=main$async_dispatch_0={junk}"])
    assert "crashed (SIG" in str(ei.value) and ei.value.stderr and ei.value.command


def test_a_kernels_digest_is_read_from_its_entry_and_never_through_a_link(tmp_path):
    """The tuner tells two candidates building one binary apart by the digest in the entry's meta.json: read by the
    cache module, as a regular file only (a planted link is no entry of ours)."""
    import json

    from boo_engine.compile.artifact import entry_binary_digest, entry_configs_dir

    entry = tmp_path / "k" / "0123"
    entry.mkdir(parents=True)
    (entry / "meta.json").write_text(json.dumps({"vmfb_sha256": "ab" * 32}))
    assert entry_binary_digest(str(entry / "kernel.vmfb")) == "ab" * 8
    assert entry_configs_dir(str(entry / "kernel.vmfb")) == str(entry / "configs")
    other = tmp_path / "other"
    other.mkdir()
    (other / "meta.json").symlink_to(entry / "meta.json")
    assert entry_binary_digest(str(other / "kernel.vmfb")) is None
    assert entry_binary_digest(str(tmp_path / "none" / "kernel.vmfb")) is None
    (entry / "meta.json").write_text("[1, 2]")
    assert entry_binary_digest(str(entry / "kernel.vmfb")) is None
