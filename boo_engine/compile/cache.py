"""Content-addressed kernel cache, safe across processes.

Layout (under the root)::

    <func_name>/<func_name>.mlir            the exported source (deterministic for a func_name)
    <func_name>/<func_name>.<form>.mlir     the same kernel written as formulation <form> (not "default")
    <func_name>/<key[:16]>/kernel.vmfb      the compiled artifact
                         /compile_command.sh the exact iree-compile command that built it (runnable)
                         /meta.json          key fields, flags, compiler version, timings, vmfb size + sha256
                         /configs/           --iree-hal-dump-executable-configurations-to output (always dumped)
    .index/<xx>/<digest>                    (signature, target, flags, variant, compiler) -> key
    .prebuilt/<xx>/<digest>                 (signature, target, flags, variant) -> key, for a machine with no compiler
    .compiler-version.json                  `iree-compile --version`, remembered per compiler build

The key is sha256 over the MLIR text, the full flag list, the target identity (resolved host CPU or GPU arch),
the variant's key material (the CONTENT of specs and substituted files) and `iree-compile --version`. Changing
any of them misses. The indexes (`.index`, `.prebuilt`: cache_records.py) let a hit skip the export.

Root: an explicit `root` argument, else `$BOO_CACHE_DIR`, else `~/.cache/boo-tui/kernels`. `BOO_CACHE_ON=0`
(when no explicit root is given) uses a private temporary cache that is deleted when the process exits.

Writes are atomic: an entry is built in a temporary folder next to its final place and renamed into place, so a
reader never sees half an entry. An entry is validated as a whole when loaded (`entry_problem`: meta.json an
object with the documented fields and types, kernel.vmfb of the recorded size and checksum, compile_command.sh,
configs/ holding every file meta lists); anything missing or damaged is treated as absent and rebuilt. A kernel is
native code, so an entry is loaded only when trusted (trust.py: signed with the user's key, in folders nobody else
can write); one that is not is rebuilt too, and `untrusted` names it for the front end's once-per-run line.

A root that exists but cannot be written (a team's warm cache on a read-only or shared mount) is used as-is for
hits, and misses are compiled into a writable overlay: `overlay` when given, else a private temporary cache
deleted at exit (`notice` says so, once, for the front end to show). A root that cannot be created, or is not a
readable folder, is a `CacheRootError` (a usage error).

A per-key fcntl lock makes concurrent compiles of the same kernel (threads or processes) compile it once.
"""
from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .. import iree_tools, locations
from ..errors import BooError, CompileError
from ..fsutil import atomic_write, file_sha256, open_lock_file, read_regular_text
from ..ops.base import DEFAULT_FORMULATION
from . import cache_records as records
from . import trust
from .entry import COMMAND, CONFIGS, META, SCHEMA, VMFB, entry_problem
from .procs import maybe_alive as _pid_alive
from .procs import owner_pid as _owner_pid
from .procs import owner_tag as _owner_tag


class CacheRootError(BooError):
    """The cache root cannot be created or used (a usage error: the front ends answer it in one line, exit 2)."""


def check_root(root: Path) -> bool:
    """Create `root` if needed and say whether it is writable (False: a read-only cache, usable for hits).
    Raises CacheRootError when it cannot be created or is not a readable folder."""
    try:
        trust.make_dirs(root)   # (never group-writable: it would not be trusted)
    except OSError as e:
        if not root.is_dir():
            raise CacheRootError(f"kernel cache {root} cannot be created: {e.strerror or e}") from None
    if not root.is_dir():
        raise CacheRootError(f"kernel cache {root} is not a folder")
    if not os.access(root, os.R_OK | os.X_OK):
        raise CacheRootError(f"kernel cache {root} cannot be read (permission denied)")
    try:  # a real write: os.access is not the whole truth (root on a read-only mount, ACLs, quotas)
        fd, probe = tempfile.mkstemp(dir=root, prefix=".probe-")
    except OSError:
        return False
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return True


def mlir_file_name(func_name: str, formulation: str = DEFAULT_FORMULATION) -> str:
    """The exported source's file name: one per (kernel, formulation), since every formulation exports its own
    MLIR and each entry's compile_command.sh reads its own."""
    if formulation == DEFAULT_FORMULATION:
        return f"{func_name}.mlir"
    return f"{func_name}.{formulation}.mlir"


class KernelCache:
    """The on-disk cache. Cheap to construct; several instances (in several processes) may share a root.

    `compiler_version` overrides `iree-compile --version` in the key (tests use it to prove a compiler upgrade
    misses); by default it is read once per compiler build and remembered in the cache root.
    """

    def __init__(self, root: str | os.PathLike | None = None, *, compiler_version: str | None = None,
                 overlay: str | os.PathLike | None = None, _lower: str | None = None):
        self.temporary = False
        #: a read-only cache whose valid entries are hits; `root` (the overlay) takes every write
        self.lower: Path | None = Path(_lower) if _lower else None
        if root is None:
            if not locations.cache_enabled():
                root = tempfile.mkdtemp(prefix="boo-kernels-")
                self.temporary = True
                atexit.register(shutil.rmtree, root, True)
            else:
                root = locations.cache_root()
        self.root = Path(root).expanduser().resolve()
        self.key = trust.cache_key()   # a key file that is not safe to use: CacheKeyError (a usage error)
        #: a line for the user when the cache is not what they asked for (a read-only root, a key of this process)
        self.notice: str | None = self.key.notice
        #: what this process saw but did not trust: (func_name, key) of an entry, or ("index"/"prebuilt", record
        #: key) of a record -> where and why, one line
        self.untrusted: dict[tuple[str, str], str] = {}
        if _lower is None:
            self._distrust_roots(overlay)
        self._compiler_version = compiler_version
        self._thread_locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._found: dict[tuple[str, str], Path] = {}
        #: the shortcut indexes (cache_records.py): `.index` skips the export, `.prebuilt` serves without a compiler
        self.index = records.SignedRecords(self, "index", ".index")
        self.prebuilt = records.SignedRecords(self, "prebuilt", ".prebuilt")

    def _distrust_roots(self, overlay: str | os.PathLike | None) -> None:
        """A read-only root serves hits beside an overlay; a root others can write is not used (trust.py)."""
        writable = check_root(self.root)
        why = self._unsafe(self.root)
        if why is None and writable:
            return
        bad, self.root = self.root, self._overlay(overlay)
        if why is None:
            self.lower = bad
            return
        self.notice = (f"kernel cache {bad} is not safe to load code from ({why}): its kernels are not used, new "
                       f"ones are compiled into {self.root}{' (deleted at exit)' if self.temporary else ''}; make "
                       f"it yours (chmod go-w), or give a team's cache a shared key (${locations.CACHE_KEY_ENV})")

    def _unsafe(self, root: Path) -> str | None:
        return None if self.key.shared else trust.path_problem(root)

    def _overlay(self, overlay: str | os.PathLike | None) -> Path:
        """The writable cache misses are compiled into when the root is read-only or not safe: `overlay` (when it is
        safe), else a private temporary cache deleted at exit."""
        path = Path(overlay).expanduser().resolve() if overlay is not None else None
        if path is not None and not check_root(path):
            raise CacheRootError(f"kernel cache {self.root} is read-only and so is the overlay {path}")
        if path is None or self._unsafe(path):
            path = Path(tempfile.mkdtemp(prefix="boo-kernels-overlay-")).resolve()
            self.temporary = True
            atexit.register(shutil.rmtree, str(path), True)
        self.notice = (f"kernel cache {self.root} is read-only: its kernels are used as they are, new ones are "
                       f"compiled into {path}" + (" (deleted at exit)" if self.temporary else ""))
        return path

    def __repr__(self) -> str:
        lower = f", lower={str(self.lower)!r}" if self.lower else ""
        return f"KernelCache({str(self.root)!r}{lower})"

    def __reduce__(self):  # picklable into worker processes: same layers, same version override, no new overlay
        return (_rebuild_cache, (str(self.root), self._compiler_version, str(self.lower) if self.lower else None))

    def roots(self) -> list[Path]:
        """Where entries are looked up, first match wins: the writable root, then the read-only one."""
        return [self.root] + ([self.lower] if self.lower is not None else [])

    # ---- compiler version -----------------------------------------------------------------------------
    @property
    def compiler_version(self) -> str:
        if self._compiler_version is None:
            self._compiler_version = self._read_compiler_version()
        return self._compiler_version

    def _read_compiler_version(self) -> str:
        exe = iree_tools.tool_path("iree-compile", CompileError)
        stamp = iree_tools.compiler_stamp(exe)
        memo = ".compiler-version.json"
        for root in self.roots():
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                known = json.loads(read_regular_text(root / memo))
                if known["stamp"] == stamp and self.key.opens("compiler", known):
                    return str(known["version"])
        version = iree_tools.compiler_version(exe, error=CompileError)
        with contextlib.suppress(OSError):
            atomic_write(self.root / memo, json.dumps(self.key.seal("compiler", {"stamp": stamp, "version": version})),
                         make_parents=True, private=True)
        return version

    # ---- keys -----------------------------------------------------------------------------------------
    def key_for(self, mlir: str, flags: list[str], target_identity: str, variant_key: str,
                decompositions: Sequence[str] = ()) -> str:
        """The entry's key. `decompositions`: the ops torch decomposed for IREE's torch input (compile/lowering.py),
        hashed as a part of their own when there are any (keys of kernels that needed none are unchanged)."""
        h = hashlib.sha256()
        extra = (f"decompositions:{json.dumps(sorted(decompositions))}",) if decompositions else ()
        for part in (f"schema{SCHEMA}", mlir, json.dumps(list(flags)), target_identity, variant_key,
                     self.compiler_version, *extra):
            h.update(part.encode())
            h.update(b"\0\1\0")
        return h.hexdigest()

    def index_key(self, sig: object, flags: list[str], target_identity: str, variant_key: str) -> str:
        return records.index_key(sig, flags, target_identity, variant_key, self.compiler_version)

    prebuilt_key = staticmethod(records.prebuilt_key)

    # ---- entries --------------------------------------------------------------------------------------
    def func_dir(self, func_name: str) -> Path:
        return self.root / func_name

    def entry_dir(self, func_name: str, key: str) -> Path:
        """Where the entry is (re)built: always under the writable root."""
        return self.func_dir(func_name) / key[:16]

    def found_dir(self, func_name: str, key: str) -> Path:
        """Where `load` last found the entry valid (the read-only root's folder for its hits)."""
        return self._found.get((func_name, key)) or self.entry_dir(func_name, key)

    def mlir_path(self, func_name: str, formulation: str = DEFAULT_FORMULATION) -> Path:
        return self.func_dir(func_name) / mlir_file_name(func_name, formulation)

    def write_mlir(self, func_name: str, text: str, formulation: str = DEFAULT_FORMULATION) -> Path:
        path = self.mlir_path(func_name, formulation)
        try:
            if read_regular_text(path) == text:
                return path
        except (OSError, ValueError):
            pass
        atomic_write(path, text, make_parents=True, private=True)
        return path

    def load(self, func_name: str, key: str) -> dict[str, Any] | None:
        """The validated meta of a trusted entry, or None when absent, truncated, damaged in any part or not
        trusted (then it gets rebuilt, in the writable root). The writable root's copy wins over the read-only's."""
        for root in self.roots():
            d = root / func_name / key[:16]
            meta = self.load_dir(d, func_name, key)
            if meta is not None:
                self._found[(func_name, key)] = d
                return meta
        return None

    def load_dir(self, d: Path, func_name: str, key: str) -> dict[str, Any] | None:
        """The meta of the entry in `d` when it is whole and trusted; an untrusted one is noted in `untrusted`."""
        try:
            meta = json.loads(read_regular_text(d / META))
            if entry_problem(d, func_name, key, meta) is not None:
                return None
            why = trust.entry_problem(d, meta, self.key, (VMFB, COMMAND, CONFIGS))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if why is None:
            return meta
        self.untrusted[(func_name, key)] = f"{d}: {why}"
        return None

    def staging_dir(self, func_name: str, key: str) -> Path:
        """A fresh temporary folder next to the entry's final place (same filesystem, so rename is atomic).
        Its name carries the creating pid, so the leftovers of a killed compiler can be told from live work."""
        parent = self.func_dir(func_name)
        parent.mkdir(parents=True, exist_ok=True)
        self.sweep_orphans(func_name)
        return Path(tempfile.mkdtemp(dir=parent, prefix=f".tmp-{key[:16]}-{_owner_tag()}-"))

    def sweep_orphans(self, func_name: str) -> int:
        """Remove the staging and trash folders of processes of this host that no longer exist (a compile
        worker killed by a cancel, a timeout or SIGKILL dies without cleaning up); a cache shared between hosts
        keeps the others' folders. Returns how many were removed."""
        removed = 0
        with contextlib.suppress(OSError):
            for d in self.func_dir(func_name).iterdir():
                pid = _owner_pid(d.name)
                if pid is not None and pid != os.getpid() and not _pid_alive(pid):
                    shutil.rmtree(d, ignore_errors=True)
                    removed += 1
        return removed

    def commit(self, staging: Path, func_name: str, key: str, meta: dict[str, Any]) -> dict[str, Any]:
        """Seal `staging` (which holds kernel.vmfb, configs/, compile_command.sh) with its meta and move it into
        place, replacing a corrupt entry if one is there. Returns the meta written."""
        vmfb = staging / VMFB
        meta = dict(meta, schema=SCHEMA, key=key, func_name=func_name,
                    vmfb_size=vmfb.stat().st_size, vmfb_sha256=file_sha256(vmfb))
        meta = trust.seal_entry(staging, meta, self.key, unlisted=(VMFB, META))
        (staging / META).write_text(json.dumps(meta, indent=2, sort_keys=True))
        final = self.entry_dir(func_name, key)
        trust.harden(staging / META)
        trust.harden(final.parent)
        self.discard(func_name, key)  # corrupt or stale: rename onto a non-empty dir would fail
        try:
            os.rename(staging, final)
        except OSError:
            # someone else (without our lock, e.g. another cache root view) won the race: keep theirs if valid
            shutil.rmtree(staging, ignore_errors=True)
            theirs = self.load(func_name, key)
            if theirs is None:
                raise
            return theirs
        return meta

    def discard(self, func_name: str, key: str) -> None:
        """Remove an entry's folder (a corrupt one, or a failed build's leftovers): renamed aside first, so
        nobody ever sees it half deleted."""
        final = self.entry_dir(func_name, key)
        if not final.exists():
            return
        try:
            trash = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".trash-{key[:16]}-{_owner_tag()}-"))
        except OSError:  # a full disk may refuse even an empty folder: remove it in place
            shutil.rmtree(final, ignore_errors=True)
            return
        with contextlib.suppress(OSError):
            os.rename(final, trash / "old")
        shutil.rmtree(trash, ignore_errors=True)

    @contextlib.contextmanager
    def lock(self, func_name: str, key: str) -> Iterator[None]:
        """Exclusive per-key lock across threads and processes, held while (re)building one entry."""
        d = self.func_dir(func_name)
        d.mkdir(parents=True, exist_ok=True)
        name = f".{key[:16]}.lock"
        with self._guard:
            tlock = self._thread_locks.setdefault(name + func_name, threading.Lock())
        with tlock:
            try:
                fd = open_lock_file(d / name)
            except OSError as e:
                raise CompileError(f"kernel cache lock {d / name}: {e.strerror or e}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)


def valid_entries(cache: KernelCache) -> Iterator[tuple[str, str, Path]]:
    """(func_name, key, dir) of every valid entry of `cache`, for listing and tests."""
    for root in cache.roots():
        for fdir in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
            for edir in sorted(p for p in fdir.iterdir() if p.is_dir() and not p.name.startswith(".")):
                with contextlib.suppress(OSError, ValueError, KeyError, TypeError, AttributeError):
                    key = json.loads(read_regular_text(edir / META))["key"]
                    if cache.load_dir(edir, fdir.name, key) is not None:
                        yield fdir.name, key, edir


def adopt(cache: KernelCache, func_name: str, key: str, meta: dict[str, Any]) -> dict[str, Any] | None:
    """Sign with `cache`'s key the entry that a peer we trust (a Ray node sharing the folder, whose key may differ)
    wrote and described with `meta`, when it is whole and is what `meta` says, file by file; its meta then."""
    d = cache.entry_dir(func_name, key)
    with cache.lock(func_name, key), contextlib.suppress(OSError, ValueError):
        theirs = json.loads(read_regular_text(d / META))
        same = json.dumps(theirs, sort_keys=True) == json.dumps(meta, sort_keys=True)
        if same and entry_problem(d, func_name, key, meta) is None and trust.files_problem(d, meta) is None:
            atomic_write(d / META, json.dumps(cache.key.seal("entry", meta), indent=2, sort_keys=True), private=True)
    return cache.load(func_name, key)


def open_cache(explicit: str | os.PathLike | None = None) -> KernelCache:
    """A session's cache: `explicit` (--cache-dir), else $BOO_CACHE_DIR or the default. When --cache-dir is
    given separately from a read-only $BOO_CACHE_DIR (a team's warm cache), that cache serves the hits and
    --cache-dir takes the compiles (the overlay)."""
    if explicit and locations.cache_enabled():
        shared = locations.cache_root().resolve()
        mine = Path(explicit).expanduser().resolve()
        if shared != mine and shared.is_dir() and not check_root(shared):
            return KernelCache(shared, overlay=mine)
    return KernelCache(explicit)


def _rebuild_cache(root: str, compiler_version: str | None, lower: str | None = None) -> KernelCache:
    return KernelCache(root, compiler_version=compiler_version, _lower=lower)


_default: KernelCache | None = None
_default_lock = threading.Lock()


def default_cache() -> KernelCache:
    """The process-wide cache from the environment ($BOO_CACHE_DIR / BOO_CACHE_ON), made on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = KernelCache()
        return _default
