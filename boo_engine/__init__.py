"""boo_engine: parse MIOpenDriver commands, compile them with IREE, measure them honestly, keep every result.

The public API is re-exported here lazily, so `import boo_engine` stays cheap until a name is used.
"""
from __future__ import annotations

import atexit
import importlib
import sys
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    # grammar and signatures
    "parse_command": "boo_engine.commands",
    "parse_invocation": "boo_engine.commands",
    "read_commands_file": "boo_engine.commands",
    "Command": "boo_engine.commands",
    "OpSignature": "boo_engine.ops.base",
    # errors
    "BooError": "boo_engine.errors",
    "CommandError": "boo_engine.errors",
    "TargetError": "boo_engine.errors",
    "VariantError": "boo_engine.errors",
    "CompileError": "boo_engine.errors",
    "LaunchError": "boo_engine.errors",
    # kernels
    "Target": "boo_engine.targets",
    "parse_target": "boo_engine.targets",
    "default_target": "boo_engine.targets",
    "Variant": "boo_engine.variants",
    "compile_signature": "boo_engine.compile.pool",
    "CompilePool": "boo_engine.compile.pool",
    "KernelCache": "boo_engine.compile.cache",
    "get_launchable": "boo_engine.runtime.launchable",
    "check_numerics": "boo_engine.numerics",
    # measuring
    "Session": "boo_engine.session",
    "SessionConfig": "boo_engine.config",
    "Store": "boo_engine.store",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def _quiet_iree_runtime_at_exit() -> None:
    """No nanobind "leaked instances" report when the process ends. IREE's runtime objects still alive then
    (results handed to torch through DLPack keep their buffers, devices and loaded kernels are cached per process)
    are no leak, the process is ending, but nanobind listed each: ~256 lines after every quit of the dashboard and
    ~200 after every `boo-tui model`. Registered when boo_engine is imported; does nothing where the runtime was
    never imported."""
    binding = sys.modules.get("iree.runtime._binding")
    off = getattr(binding, "disable_leak_checker", None)
    if callable(off):
        off()


atexit.register(_quiet_iree_runtime_at_exit)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'boo_engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
