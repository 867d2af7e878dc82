"""One kernel cache entry's layout (the files of `<func_name>/<key[:16]>/`, meta.json's fields) and the check that
an entry is whole before it is loaded (`entry_problem`); the cache itself is `cache.py`."""
from __future__ import annotations

from pathlib import Path

from ..fsutil import file_sha256

VMFB = "kernel.vmfb"
META = "meta.json"
COMMAND = "compile_command.sh"
CONFIGS = "configs"
#: bump when the layout or the key recipe changes, so old entries are never misread
SCHEMA = 1

#: meta.json fields an entry needs, with their types (a damaged meta is rebuilt, never trusted)
META_TYPES: dict[str, type] = {
    "schema": int, "key": str, "func_name": str, "vmfb_size": int, "vmfb_sha256": str, "command": list,
    "flags": list, "compiler_version": str, "num_dispatches": int, "configs": list,
}



def entry_problem(d: Path, func_name: str, key: str, meta: object) -> str | None:
    """What is wrong with the entry in `d` whose parsed meta.json is `meta`, or None when it is whole."""
    if not isinstance(meta, dict):
        return f"meta.json is a {type(meta).__name__}, not an object"
    problem = _meta_problem(func_name, key, meta)
    if problem is not None:
        return problem
    return _files_problem(d, meta)


def _meta_problem(func_name: str, key: str, meta: dict) -> str | None:
    """What is wrong with an entry's meta.json object itself (its fields, types and counts), or None."""
    for name, kind in META_TYPES.items():
        value = meta.get(name)
        if not isinstance(value, kind) or isinstance(value, bool):
            return f"meta.json field {name!r} is missing or not a {kind.__name__}"
    if meta["key"] != key or meta["schema"] != SCHEMA or meta["func_name"] != func_name:
        return "meta.json belongs to another entry or schema"
    if not all(isinstance(x, str) for x in meta["command"] + meta["flags"] + meta["configs"]):
        return "meta.json lists a non-string"
    if meta["num_dispatches"] != len(meta["configs"]):
        return "meta.json num_dispatches does not match its configs"
    return None


def _files_problem(d: Path, meta: dict) -> str | None:
    """What is wrong with the files of the entry in `d` against its checked meta.json, or None."""
    vmfb = d / VMFB
    if not vmfb.is_file() or vmfb.is_symlink():
        return "kernel.vmfb is not a regular file"
    if vmfb.stat().st_size != meta["vmfb_size"] or file_sha256(vmfb) != meta["vmfb_sha256"]:
        return "kernel.vmfb has the wrong size or checksum"
    if not (d / COMMAND).is_file() or (d / COMMAND).is_symlink():
        return f"{COMMAND} is missing"
    configs = d / CONFIGS
    if not configs.is_dir():
        return f"{CONFIGS}/ is missing"
    for name in meta["configs"]:
        if Path(name).name != name or not (configs / name).is_file():
            return f"{CONFIGS}/{name} is missing"
    return None
