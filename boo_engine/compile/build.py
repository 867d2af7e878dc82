"""Compiling one signature into the kernel cache, synchronously: `lookup_cached` (no export, a few file reads) and
`compile_signature` (export, then iree-compile through compile.compiler_run, into a staged cache entry).

Where no iree-compile is installed (a GPU machine lent a cache that was filled elsewhere: the compiler wheel is
too big to carry), nothing is exported or compiled and iree.compiler is never imported: a kernel is resolved
through the cache's prebuilt index alone (cache.py), and one that is not there fails in one line saying where
to build it.

iree-compile always runs as a child process: a compiler crash (it happens, e.g. with some substitution flags)
is then a CompileError, never the death of the caller, every compile gets its own flags, and a timeout kills it.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import iree_tools, locations
from ..errors import CompileError
from ..ops.base import DEFAULT_FORMULATION, OpSignature
from ..targets import BOO_BUILD, OUR_BUILD, Target
from ..variants import BASELINE, Variant
from . import cache as cache_mod
from .aligned import ALIGNED_SPEC, FIRST_PASS_TIMEOUT_S, AlignedTiles, first_pass
from .artifact import Artifact, artifact_from_meta
from .cache import KernelCache
from .compiler_run import run_compiler
from .entry import COMMAND, CONFIGS, VMFB
from .flags import as_target, compile_flags, kernel_build, key_flags, run_flags
from .lowering import decompositions_in
from .storage import storing
from .turbine import NotBoo, boo_problem, turbine_version

DEFAULT_TIMEOUT_S = 600.0
#: the file name label (cache.mlir_file_name) of iree-turbine's MLIR of a kernel, beside our formulations'
BOO_MLIR = "boo"


def kernel_key_material(sig: OpSignature, target: Target, variant: Variant, *, exact: bool = True) -> str:
    """What keys the kernel beyond its flags: the variant's own files and formulation (`Variant.key_material`)
    and, for BOO's build, where its MLIR comes from (iree-turbine and its version, or our export), so installing
    turbine, or another version of it, never reuses a kernel built from the other source. `exact=False`: BOO's
    build without its source, for the prebuilt index a machine with no compiler (and no turbine) resolves a
    carried cache through, as it takes no torch or compiler version either."""
    vkey = variant.key_material(sig.func_name)
    if kernel_build(target, variant) != BOO_BUILD:
        return vkey
    problem = boo_problem(sig, variant.export_formulation(sig.func_name)) if exact else None
    source = (f"iree-turbine {turbine_version()}" if exact else "any") if problem is None else OUR_BUILD
    return hashlib.sha256(f"{vkey}\0{BOO_BUILD}\0{source}".encode()).hexdigest()


def export_kernel(sig: OpSignature, target: Target, variant: Variant) -> tuple[str, str, str]:
    """(MLIR, its file label, the build in one line) of the kernel `variant` builds: our export of its
    formulation ("ours", "ours: matmul formulation"), or for BOO's build iree-turbine's export ("boo:
    iree-turbine 3.9.0"), else our export compiled with BOO's flags, saying why ("boo: our export (bnorm is not an
    op BOO has)")."""
    from .export import export_mlir  # imports iree.compiler (~70 ms): only when a compile may be needed

    formulation = variant.export_formulation(sig.func_name)
    if kernel_build(target, variant) != BOO_BUILD:
        ours = OUR_BUILD if formulation == DEFAULT_FORMULATION else f"{OUR_BUILD}: {formulation} formulation"
        return export_mlir(sig, formulation), formulation, ours
    problem = boo_problem(sig, formulation)
    if problem is None:
        from .turbine import export_boo

        try:
            return export_boo(sig), BOO_MLIR, f"{BOO_BUILD}: iree-turbine {turbine_version()}"
        except NotBoo as e:
            problem = str(e)
    return export_mlir(sig, formulation), formulation, f"{BOO_BUILD}: our export ({problem})"


def _prebuilt(cache: KernelCache, sig: OpSignature, flags: list[str], identity: str, vkey: str, target: Target,
              variant: Variant) -> Artifact | None:
    """The kernel the prebuilt index names for this signature, or None."""
    found = cache.prebuilt.lookup(cache.prebuilt_key(sig, flags, identity, vkey))
    meta = cache.load(*found) if found is not None else None
    return None if meta is None else artifact_from_meta(cache, meta, target, variant, cache_hit=True, seconds=0.0)


def _remember_prebuilt(cache: KernelCache, sig: OpSignature, flags: list[str], identity: str, vkey: str,
                       meta: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):  # only a machine without a compiler reads it: the entry itself is stored
        cache.prebuilt.record(cache.prebuilt_key(sig, flags, identity, vkey), meta["func_name"], meta["key"])


def not_prebuilt(sig: OpSignature, target: Target, cache: KernelCache) -> CompileError:
    """The one-line error for a kernel a machine without a compiler cannot resolve."""
    if cache.untrusted:   # a carried cache, signed with a key this machine does not have
        return CompileError(
            f"{sig.func_name}: the kernel cache {cache.root} holds kernels not signed with your key "
            f"({cache.key.path}), and no iree-compile is installed here to build them anew: carry the key that "
            f"filled the cache with it and name it in ${locations.CACHE_KEY_ENV}")
    return CompileError(
        f"{sig.func_name}: not in the kernel cache {cache.root}, and no iree-compile is installed here to build "
        f"it: fill the cache where iree-base-compiler is (boo-driver --preload --commands-file FILE --target "
        f"{target.name} --cache-dir DIR, with the same variants) and pass --cache-dir DIR here")


def lookup_cached(sig: OpSignature, target: Target | str, variant: Variant = BASELINE, *,
                  cache: KernelCache | None = None, extra_flags: Sequence[str] = ()) -> Artifact | None:
    """The cached artifact for this kernel, found without exporting (a few file reads), or None."""
    target = as_target(target)
    cache = cache or cache_mod.default_cache()
    flags = key_flags(sig, target, variant, extra_flags)
    identity, vkey = target.identity(), kernel_key_material(sig, target, variant)
    pkey = kernel_key_material(sig, target, variant, exact=False)
    if not iree_tools.compiler_here():
        return _prebuilt(cache, sig, flags, identity, pkey, target, variant)
    found = cache.index.lookup(cache.index_key(sig, flags, identity, vkey))
    if found is None:
        return None
    meta = cache.load(*found)
    if meta is None:
        return None
    _remember_prebuilt(cache, sig, flags, identity, pkey, meta)
    return artifact_from_meta(cache, meta, target, variant, cache_hit=True, seconds=0.0)


def compile_signature(sig: OpSignature, target: Target | str = "cpu", variant: Variant = BASELINE, *,
                      cache: KernelCache | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                      extra_flags: Sequence[str] = ()) -> Artifact:
    """Export and compile `sig` for `target` with `variant` (written as the variant's formulation), through the
    cache. Raises CompileError when the kernel has no such formulation, or when export or iree-compile fails,
    crashes or exceeds `timeout_s` (stderr and the command line are kept)."""
    target = as_target(target)
    variant = variant or BASELINE
    cache = cache or cache_mod.default_cache()
    flags = compile_flags(sig, target, variant, extra_flags)
    kflags = key_flags(sig, target, variant, extra_flags)   # the variant's files by content, not path
    identity, vkey = target.identity(), kernel_key_material(sig, target, variant)
    pkey = kernel_key_material(sig, target, variant, exact=False)
    if not iree_tools.compiler_here():
        art = _prebuilt(cache, sig, kflags, identity, pkey, target, variant)
        if art is None:
            raise not_prebuilt(sig, target, cache)
        return art
    ikey = cache.index_key(sig, kflags, identity, vkey)
    found = cache.index.lookup(ikey)
    if found is not None:
        meta = cache.load(*found)
        if meta is not None:
            _remember_prebuilt(cache, sig, kflags, identity, pkey, meta)
            return artifact_from_meta(cache, meta, target, variant, cache_hit=True, seconds=0.0)

    t0 = time.perf_counter()
    mlir, label, build = export_kernel(sig, target, variant)
    export_s = time.perf_counter() - t0
    func = sig.func_name
    decompositions = decompositions_in(mlir)
    key = cache.key_for(mlir, kflags, identity, vkey, decompositions)
    hit = True
    meta = cache.load(func, key)
    if meta is None:
        # a write the cache cannot take (full disk, quota, file size limit, read-only) is one line naming it
        with storing(cache.root), cache.lock(func, key):
            meta = cache.load(func, key)  # another process may have built it while we waited
            if meta is None:
                hit = False
                mlir_path = cache.write_mlir(func, mlir, label)
                meta = _build(cache, sig, target, variant, flags, key, mlir_path, timeout_s,
                              export_s=export_s, identity=identity, variant_key=vkey,
                              decompositions=decompositions, build=build)
    with contextlib.suppress(OSError):  # the index only saves the next export: the entry itself is stored
        cache.index.record(ikey, func, key)
    _remember_prebuilt(cache, sig, kflags, identity, pkey, meta)
    seconds = 0.0 if hit else time.perf_counter() - t0
    return artifact_from_meta(cache, meta, target, variant, cache_hit=hit, seconds=seconds,
                              untrusted="" if hit else cache.untrusted.get((func, key), ""))


def _build(cache: KernelCache, sig: OpSignature, target: Target, variant: Variant, flags: list[str], key: str,
           mlir_path: Path, timeout_s: float, *, export_s: float, identity: str, variant_key: str,
           decompositions: tuple[str, ...] = (), build: str = OUR_BUILD) -> dict[str, Any]:
    func = sig.func_name
    exe = iree_tools.tool_path("iree-compile", CompileError)
    final = cache.entry_dir(func, key)
    staging = cache.staging_dir(func, key)

    # The configurations are dumped straight to the entry's final configs/ folder: IREE records the dump path in
    # the vmfb, so only then does compile_command.sh (final paths) rebuild a byte-identical kernel. The vmfb is
    # written to the staging folder, and the folder becomes visible as a valid entry only at the final rename
    # (readers check meta.json; writers hold the per-key lock).
    cache.discard(func, key)
    try:
        t0 = time.perf_counter()
        aligned = _aligned(exe, mlir_path, flags, staging, func, target, variant, timeout_s)
        first_s = time.perf_counter() - t0
        try:
            seconds, shown = _compile(exe, mlir_path, flags, staging, final, func, timeout_s, aligned)
        except CompileError:
            if aligned is None:
                raise
            # IREE refused the aligned tiles: the kernel as IREE configures it, as if there were no rule
            cache.discard(func, key)
            (staging / ALIGNED_SPEC).unlink(missing_ok=True)
            aligned = None
            seconds, shown = _compile(exe, mlir_path, flags, staging, final, func, timeout_s, aligned)
        if not (staging / VMFB).is_file() or (staging / VMFB).stat().st_size == 0:
            raise CompileError(f"{func}: iree-compile exited 0 but wrote no kernel", command=shown)
        if (final / CONFIGS).is_dir():
            os.rename(final / CONFIGS, staging / CONFIGS)
        else:
            (staging / CONFIGS).mkdir()
        cache.discard(func, key)
        script = "#!/bin/sh\n# rebuilds kernel.vmfb of this cache entry\nexec " + shlex.join(shown) + "\n"
        (staging / COMMAND).write_text(script)
        (staging / COMMAND).chmod(0o755)
        configs = sorted(p.name for p in (staging / CONFIGS).iterdir())
        meta = {
            "signature": repr(sig), "op": sig.op, "mode": sig.mode, "dtype": sig.dtype_name,
            "target": target.name, "target_identity": identity, "variant": variant.describe(),
            "variant_key": variant_key, "flags": flags, "command": shown,
            "compiler_version": cache.compiler_version, "compile_seconds": round(seconds + first_s, 4),
            "export_seconds": round(export_s, 4), "num_dispatches": len(configs), "configs": configs,
            "mlir_sha256": cache_mod.file_sha256(mlir_path), "created_at": time.time(),
            "decompositions": list(decompositions), "mlir_name": mlir_path.name,
            "build": f"{build}; {ALIGNED_BUILD}" if aligned is not None else build,
            "aligned_tiles": aligned.describe() if aligned is not None else "",
        }
        return cache.commit(staging, func, key, meta)
    except BaseException:
        cache.discard(func, key)  # the half-dumped configs of a failed compile
        raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


#: how the build of a kernel with aligned workgroup tiles says so ("ours: matmul formulation; aligned tiles")
ALIGNED_BUILD = "aligned tiles"


def _aligned(exe: str, mlir_path: Path, flags: list[str], staging: Path, func: str, target: Target,
             variant: Variant, timeout_s: float) -> AlignedTiles | None:
    """The aligned tiles of a variant that asks for them (`Variant.aligned_tiles`, the CPU only, and no tuning
    spec of its own: IREE takes one), their spec written into the staging folder; else None."""
    if not variant.aligned_tiles or target.kind != "cpu" or any(f.startswith(_SPEC_FLAG) for f in flags):
        return None
    aligned = first_pass(exe, mlir_path, [*flags, *run_flags(flags)], staging, func,
                         min(timeout_s, FIRST_PASS_TIMEOUT_S))
    if aligned is not None:
        (staging / ALIGNED_SPEC).write_text(aligned.spec)
    return aligned


_SPEC_FLAG = "--iree-codegen-tuning-spec-path="


def _compile(exe: str, mlir_path: Path, flags: list[str], staging: Path, final: Path, func: str, timeout_s: float,
             aligned: AlignedTiles | None) -> tuple[float, list[str]]:
    """Run the real compile into `staging`, its configurations dumped to the entry's final folder; (wall seconds,
    the command as compile_command.sh shows it: final paths)."""
    spec = [f"{_SPEC_FLAG}{staging / ALIGNED_SPEC}"] if aligned is not None else []
    shown_spec = [f"{_SPEC_FLAG}{final / ALIGNED_SPEC}"] if aligned is not None else []
    tail = [*run_flags(flags), f"--iree-hal-dump-executable-configurations-to={final / CONFIGS}", "-o"]
    cmd = [exe, str(mlir_path), *flags, *spec, *tail, str(staging / VMFB)]
    shown = [exe, str(mlir_path), *flags, *shown_spec, *tail, str(final / VMFB)]
    return run_compiler(cmd, shown, func, timeout_s), shown
