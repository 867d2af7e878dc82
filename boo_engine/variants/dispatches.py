"""Edited dispatches: the folder `--dump-dispatches` writes (sources, configurations and a manifest of the
originals' digests) and the substitutions such a folder asks for once the user edited a file in it.

Only EDITED files are substituted: substituting an unchanged configuration next to an edited source silently
discards the source edit (the configuration substitution happens later in IREE's pipeline and wins). The dump
itself is a compile: it runs in the compile layer (boo_engine.compile.dump), which writes its files with
`install_dump`."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import VariantError
from ..fsutil import atomic_write
from .common import DUMP_MANIFEST, KINDS, one_line
from .mlir_text import dispatch_kind, executable_name

if TYPE_CHECKING:  # pragma: no cover
    from .variant import Variant

HOW = ("edit ONE file per dispatch (its source module_*.mlir or its configuration configured_module_*.mlir), "
       "then measure with --variant NAME=<this folder>/ ; only edited files are substituted")


def substitutions_from_dir(folder: str | os.PathLike[str], kinds: Sequence[str] = KINDS
                           ) -> tuple[list[tuple[str, str, str]], str | None]:
    """The substitutions a dispatch folder asks for, and the kernel it was dumped from (None without a
    manifest). Each `*.mlir` is a source (`module_<exe>.mlir`, as IREE dumps them) or a configuration
    (`configured_module_<exe>.mlir`; or, for other names, any file carrying lowering_config/translation_info);
    the executable is read from the file's `hal.executable @name`. With a dump manifest only EDITED files are
    substituted (an unchanged configuration next to an edited source would discard the edit)."""
    d = Path(folder)
    if not d.is_dir():
        raise VariantError(f"dispatch folder {d}: no such directory")
    manifest = read_manifest(d)
    originals: dict[str, Any] = manifest.get("files", {}) if manifest else {}
    subs: list[tuple[str, str, str]] = []
    for f in sorted(d.glob("*.mlir")):
        try:
            data = f.read_bytes()
        except OSError as e:
            raise VariantError(f"dispatch file {f}: {e.strerror or e}") from None
        if originals.get(f.name, {}).get("sha256") == hashlib.sha256(data).hexdigest():
            continue  # unchanged since the dump
        text = data.decode(errors="replace")
        exe = executable_name(text)
        if exe is None:
            raise VariantError(f"dispatch file {f}: holds no hal.executable (not written by --dump-dispatches?)")
        kind = dispatch_kind(f.name, text)
        if kind in kinds:
            subs.append((kind, exe, str(f.resolve())))
    if not subs:
        what = "no file differs from the dump (edit one first)" if originals else "holds no dispatch .mlir files"
        raise VariantError(f"dispatch folder {d}: {what}")
    return subs, (manifest or {}).get("func_name")


def read_manifest(d: Path) -> dict[str, Any] | None:
    """The dump manifest of folder `d`, None without one; VariantError when it cannot be read."""
    f = d / DUMP_MANIFEST
    if not f.is_file():
        return None
    try:
        data = json.loads(f.read_text())
    except (OSError, ValueError) as e:
        raise VariantError(f"dump manifest {f}: unreadable ({one_line(str(e))}); delete it to substitute "
                           "every .mlir file in the folder") from None
    return data if isinstance(data, dict) else None


def refuse_to_clobber_edits(dest: Path) -> None:
    """VariantError when `dest` holds a .mlir file that is not as dumped (an edit a new dump would destroy)."""
    if not dest.is_dir():
        return
    manifest = read_manifest(dest) or {}
    originals = manifest.get("files", {})
    for f in sorted(dest.glob("*.mlir")):
        digest = hashlib.sha256(f.read_bytes()).hexdigest()
        if originals.get(f.name, {}).get("sha256") != digest:
            raise VariantError(f"dump folder {dest}: {f.name} was edited (or is not from a dump); "
                               "dump into another folder or move it away first")


def install_dump(files: Sequence[Path], dest: Path, *, func_name: str, target_name: str, variant: Variant,
                 flags: Sequence[str]) -> list[Path]:
    """Replace the .mlir files of `dest` by the freshly dumped `files` and write the manifest (kernel, target,
    variant, flags, every file's kind, executable and digest). Returns the files written."""
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("*.mlir"):
        old.unlink()
    written = []
    for f in files:
        shutil.copyfile(f, dest / f.name)
        written.append(dest / f.name)
    manifest = {
        "func_name": func_name,
        "target": target_name,
        "variant": variant.describe(),
        "flags": list(flags),
        "files": {f.name: {"kind": dispatch_kind(f.name, f.read_text(errors="replace")),
                           "executable": executable_name(f.read_text(errors="replace")),
                           "sha256": hashlib.sha256(f.read_bytes()).hexdigest()} for f in written},
        "how": HOW,
    }
    atomic_write(dest / DUMP_MANIFEST, json.dumps(manifest, indent=2) + "\n")
    return written
