"""Which kernel cache entries may be loaded. A kernel.vmfb is native code: IREE's runtime dlopens the system library
a vmfb may carry, and its constructors run at load, before any kernel is called. A checksum in meta.json anyone
can recompute, so it says nothing about who made the entry. What does:

- **A signature.** Every entry's meta.json carries `mac`, an HMAC-SHA256 made with the user's key over the whole
  meta: the entry's key and name, flags, command, compiler, the sha256 of kernel.vmfb and (`files`) of
  compile_command.sh and every configs/ file. `entry_problem` checks it (hmac.compare_digest) and those checksums
  before an entry is loaded; one that fails is a miss, compiled anew (the bad one replaced), and the front end
  says so once per run. Index records and the remembered compiler version are sealed the same way; one that is
  not is a miss. Entries of an earlier boo-tui carry no signature: they are compiled once more, then signed.
- **Nobody else can write there** (the user's own key): the cache root and every folder above it belong to the
  user or root, the entry's folders and files too, and none can be written by a group or by everyone (a sticky
  folder, and a group of the user's alone, excepted), as ssh and git's safe.directory ask. A root that fails is
  not used at all (`path_problem`; the cache says why once and compiles into a private temporary one): whoever
  can write there could swap a checked kernel before the benchmark worker loads it.
- **The key**: 32 random bytes as 64 hex digits, the user's own (`locations.cache_key_file`:
  ~/.config/boo-tui/cache-key, made on first use, 0600 in a 0700 folder, outside every cache), or a team's that
  $BOO_CACHE_KEY names. With a shared key the ownership rule is waived: whoever holds the key can sign anything,
  so a shared cache trusts exactly its key's holders. A key file must be a regular file of the user's that nobody
  else can read or write, in folders nobody else can write; anything else is `CacheKeyError`, a usage error (one
  line, exit 2).
"""
from __future__ import annotations

import contextlib
import errno
import functools
import grp
import hashlib
import hmac
import json
import os
import pwd
import secrets
import stat
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from .. import locations
from ..errors import BooError
from ..fsutil import file_sha256

KEY_BYTES = 32
MAC = "mac"
FILES = "files"
MAKE_KEY = 'python3 -c "import secrets; print(secrets.token_hex(32))" > FILE; chmod 600 FILE'
#: what an entry without a valid signature is told apart by (the front ends' once-per-run line names it)
UNSIGNED = "no valid signature of yours (made by someone else or by an older boo-tui, or changed since)"


class CacheKeyError(BooError):
    """The cache key cannot be made, or its file is not safe to use: a usage error (one line, exit 2)."""


@dataclass(frozen=True)
class CacheKey:
    secret: bytes = field(repr=False)
    path: Path
    shared: bool      # named by $BOO_CACHE_KEY: a team's; its holders are trusted wherever their entries are
    #: set when the user's own key could not be made (a read-only home): this process's key, said once, and the
    #: entries it signs are recompiled by the next process
    notice: str | None = None

    def _mac(self, purpose: str, body: dict[str, Any]) -> bytes:
        text = json.dumps([purpose, body], sort_keys=True, separators=(",", ":"))
        return hmac.new(self.secret, text.encode(), hashlib.sha256).hexdigest().encode()

    def seal(self, purpose: str, record: dict[str, Any]) -> dict[str, Any]:
        """`record` signed for `purpose` (what it is and, for a record, which: it cannot be moved elsewhere)."""
        body = {k: v for k, v in record.items() if k != MAC}
        return {**body, MAC: self._mac(purpose, body).decode()}

    def opens(self, purpose: str, record: object) -> bool:
        """Was `record` (parsed JSON) sealed with this key for `purpose`, and not changed since?"""
        if not isinstance(record, dict) or not isinstance(record.get(MAC), str):
            return False
        body = {k: v for k, v in record.items() if k != MAC}
        return hmac.compare_digest(record[MAC].encode("utf-8", "replace"), self._mac(purpose, body))


_keys: dict[tuple[str, bool], CacheKey] = {}
_keys_lock = threading.Lock()


def cache_key() -> CacheKey:
    """The key this process signs and checks entries with (the user's own is made on first use), read once.
    Raises CacheKeyError."""
    path, shared = locations.cache_key_file()
    with _keys_lock:
        key = _keys.get((str(path), shared))
        if key is None:
            if not shared:
                try:
                    _make_key(path)
                except CacheKeyError as e:
                    # A home that cannot be written (some CI machines): refusing would stop every compile, and
                    # a key no other process knows still keeps a planted entry out. Said once, with the way out.
                    key = _keys[(str(path), shared)] = CacheKey(
                        secrets.token_bytes(KEY_BYTES), path, shared,
                        notice=f"{e}: this run signs its kernels with a key of its own, so the next run compiles "
                               "them again")
                    return key
            key = _keys[(str(path), shared)] = CacheKey(_read_key(path, shared), path, shared)
    return key


def _make_key(path: Path) -> None:
    if os.path.lexists(path):
        return
    try:
        make_dirs(path.parent, 0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".cache-key-")   # 0600
        try:
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(KEY_BYTES) + "\n")
                f.flush()
                os.fsync(f.fileno())
            with contextlib.suppress(FileExistsError):   # (O_EXCL, whole) another process made one first: theirs
                os.link(tmp, path)
        finally:
            os.unlink(tmp)
    except OSError as e:
        raise CacheKeyError(f"kernel cache key {path} cannot be made: {e.strerror or e} (or name a key file in "
                            f"${locations.CACHE_KEY_ENV})") from None


def _read_key(path: Path, shared: bool) -> bytes:
    where = f"kernel cache key {path}" + (f" (${locations.CACHE_KEY_ENV})" if shared else "")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        why = "is a symbolic link: name the file itself" if e.errno == errno.ELOOP else (e.strerror or str(e))
        raise CacheKeyError(f"{where}: {why}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CacheKeyError(f"{where} is not a regular file")
        if st.st_uid != os.geteuid():
            raise CacheKeyError(f"{where} belongs to uid {st.st_uid}, not to you: keep a copy of your own")
        if st.st_mode & 0o077:
            raise CacheKeyError(f"{where} can be read or written by others (mode {stat.S_IMODE(st.st_mode):04o}): "
                                f"chmod 600 {path}")
        folder = path_problem(path.parent)
        if folder:
            raise CacheKeyError(f"{where} is in a folder others can write: {folder}")
        text = os.read(fd, 4096).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        secret = b""
    if len(secret) < KEY_BYTES:
        raise CacheKeyError(f"{where} is not a key ({2 * KEY_BYTES} hex digits or more; make one: {MAKE_KEY})")
    return secret


def make_dirs(path: Path, mode: int = 0o755) -> None:
    """Create `path` and its missing parents with `mode`, never group- or world-writable: os.makedirs gives the
    parents the umask's mode, which umask 002 leaves group-writable. Raises OSError."""
    for d in reversed([path, *path.parents]):
        if not d.is_dir():
            with contextlib.suppress(FileExistsError):
                os.mkdir(d, mode & ~0o022)


def harden(path: Path, *, inside: bool = False) -> None:
    """Take group and world write off `path` (and, `inside`, off everything in it; links are left alone): what
    umask 002 gives the files iree-compile writes would make the entry untrusted. Ours only."""
    for p in [path, *(path.rglob("*") if inside else ())]:
        with contextlib.suppress(OSError):
            st = os.lstat(p)
            if not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o022 and st.st_uid == os.geteuid():
                os.chmod(p, stat.S_IMODE(st.st_mode) & ~0o022)


@functools.cache
def _own_group(gid: int) -> bool:
    """A group of the user's alone (a "user private group", which umask 002 systems pair with): the user's primary
    group, named as the user, with no other members. Its write bit lets nobody else in."""
    try:
        me, group = pwd.getpwuid(os.geteuid()), grp.getgrgid(gid)
    except KeyError:
        return False
    return gid == me.pw_gid and group.gr_name == me.pw_name and set(group.gr_mem) <= {me.pw_name}


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def writable_by_others(st: os.stat_result) -> str | None:
    """Why someone but the user (or root) can change what `st` describes, or None."""
    if st.st_uid not in (os.geteuid(), 0):
        return f"belongs to uid {st.st_uid}"
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISDIR(st.st_mode) and mode & stat.S_ISVTX:
        return None   # sticky: others may add names, never rename or remove the user's
    if mode & 0o002:
        return f"can be written by everyone (mode {mode:04o})"
    if mode & 0o020 and not _own_group(st.st_gid):
        return f"can be written by group {_group_name(st.st_gid)} (mode {mode:04o})"
    return None


def path_problem(path: Path) -> str | None:
    """Why someone but the user (or root) could change what is under `path` (a cache root, a key's folder): it or a
    folder above it belongs to another user or can be written by others. None: nobody else can."""
    try:
        real = path.resolve(strict=True)
        for d in (real, *real.parents):
            why = writable_by_others(os.lstat(d))
            if why:
                return f"{d} {why}"
    except OSError as e:
        return f"{path}: {e.strerror or e}"
    return None


def entry_problem(d: Path, meta: dict[str, Any], key: CacheKey, members: Iterable[str]) -> str | None:
    """Why the entry in `d`, whole by cache.entry_problem, must not be loaded, or None: its signature, the files it
    lists and (own key) that nobody else can write its folders, `members` or those files."""
    if not key.opens("entry", meta):
        return UNSIGNED
    why = files_problem(d, meta)
    if why is not None or key.shared:
        return why
    files = meta[FILES]
    for p in (d.parent, d, *(d / m for m in members), *(d / rel for rel in files)):
        try:
            st = os.lstat(p)
        except OSError:
            return f"{p} is missing"
        why = "is a link" if stat.S_ISLNK(st.st_mode) else writable_by_others(st)
        if why:
            return f"{p} {why}"
    return None


def inside_entry(rel: str) -> bool:
    """Whether `rel` names a file inside an entry's folder: relative, plain, no '..' (a meta.json's list, the
    names a Ray node ships its entry under)."""
    parts = PurePosixPath(rel).parts
    return bool(parts) and not rel.startswith("/") and "\\" not in rel and all(
        p not in ("..", ".") and "\0" not in p for p in parts)


def files_problem(d: Path, meta: dict[str, Any]) -> str | None:
    """Which file of those `meta` lists (with their sha256) is not in `d` as listed, or None."""
    files = meta.get(FILES)
    if not isinstance(files, dict):
        return "meta.json lists no files"
    for rel, digest in files.items():
        if not inside_entry(rel):
            return f"meta.json lists {rel!r}"
        try:
            if file_sha256(d / rel) != digest:
                return f"{rel} changed since it was signed"
        except OSError:
            return f"{rel} is missing or not a regular file"
    return None


def seal_entry(d: Path, meta: dict[str, Any], key: CacheKey, *, unlisted: Iterable[str]) -> dict[str, Any]:
    """`meta` with the checksums of the files in `d` (but the `unlisted` ones: kernel.vmfb has its own field) and
    signed. The files lose group and world write first."""
    harden(d, inside=True)
    skip = set(unlisted)
    files = {str(p.relative_to(d)): file_sha256(p) for p in sorted(d.rglob("*"))
             if p.is_file() and not p.is_symlink() and str(p.relative_to(d)) not in skip}
    return key.seal("entry", {**meta, FILES: files})
