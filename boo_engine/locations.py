"""Every path boo-tui uses by default and every environment variable it reads, in one place.

Precedence everywhere: an explicit argument (a command-line option) > the environment variable > the default.
Nothing else in the engine or the dashboard reads `os.environ` for these.

| what | variable | default |
|---|---|---|
| results database | BOO_DB | ./boo-results.db |
| kernel cache | BOO_CACHE_DIR | ~/.cache/boo-tui/kernels ($XDG_CACHE_HOME honoured) |
| kernel cache off | BOO_CACHE_ON=0 | on (off: a private temporary cache, deleted at exit) |
| the kernel cache's signing key | BOO_CACHE_KEY (a team's, shared) | ~/.config/boo-tui/cache-key (made on first use) |
| linked tuning specs | BOO_SPEC_CACHE_DIR | ~/.cache/boo-tui/linked-specs |
| per-machine CPU defaults (tune) | BOO_DEFAULTS_TABLE (off: rules only) | ~/.cache/boo-tui/cpu-defaults.json |
| the resolved host CPU, remembered per compiler build | - | ~/.cache/boo-tui/host-cpu.json |
| the measured peaks (`boo-tui peak`), per machine | BOO_PEAKS_FILE | ~/.cache/boo-tui/peaks.json |
| a tuning spec as a variant | BOO_TUNING_SPEC_PATH | none (iree-boo-driver's variable) |
| the kernels torch calls get (`iree_boo`, `boo_engine.nn`) | BOO_KERNELS (best, boo) | best |
| iree-turbine, for the boo column (installed there by setup.sh) | BOO_TURBINE_DIR | ~/.cache/boo-tui/iree-turbine |
| child processes' output | BOO_CHILD_LOG | the parent's terminal (the dashboard sets a log file) |
| tracebacks for internal errors | BOO_DEBUG | off |
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

DB_ENV = "BOO_DB"
DEFAULT_DB_NAME = "boo-results.db"
#: every front end's --db help: the default `db_path()` uses (tune's once named one it did not)
DB_HELP = f"results database (default ${DB_ENV} or ./{DEFAULT_DB_NAME})"
#: every front end's --cache-dir help: the default `cache_root()` uses
CACHE_HELP = "kernel cache (default $BOO_CACHE_DIR or ~/.cache/boo-tui/kernels)"
CACHE_DIR_ENV = "BOO_CACHE_DIR"
CACHE_ON_ENV = "BOO_CACHE_ON"
CACHE_KEY_ENV = "BOO_CACHE_KEY"
SPEC_CACHE_ENV = "BOO_SPEC_CACHE_DIR"
DEFAULTS_TABLE_ENV = "BOO_DEFAULTS_TABLE"
TUNING_SPEC_ENV = "BOO_TUNING_SPEC_PATH"
KERNELS_ENV = "BOO_KERNELS"
TURBINE_DIR_ENV = "BOO_TURBINE_DIR"
CHILD_LOG_ENV = "BOO_CHILD_LOG"
DEBUG_ENV = "BOO_DEBUG"
PEAKS_FILE_ENV = "BOO_PEAKS_FILE"
RAY_ADDRESS_ENV = "BOO_RAY_ADDRESS"

_OFF = ("0", "false", "no", "off")


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def user_cache_home(environ: Mapping[str, str] | None = None) -> Path:
    """$XDG_CACHE_HOME, else ~/.cache."""
    return Path(_env(environ).get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()


def user_config_home(environ: Mapping[str, str] | None = None) -> Path:
    """$XDG_CONFIG_HOME, else ~/.config."""
    return Path(_env(environ).get("XDG_CONFIG_HOME") or Path.home() / ".config").expanduser()


def db_path(explicit: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """The results database: `explicit` (--db), else $BOO_DB, else boo-results.db in the current directory."""
    if explicit:
        return Path(explicit)
    value = _env(environ).get(DB_ENV)
    return Path(value) if value else Path.cwd() / DEFAULT_DB_NAME


def cache_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """False when BOO_CACHE_ON asks for no persistent cache (0, false, no, off)."""
    return _env(environ).get(CACHE_ON_ENV, "1").strip().lower() not in _OFF


def cache_root(explicit: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """The kernel cache's root: `explicit` (--cache-dir), else $BOO_CACHE_DIR, else ~/.cache/boo-tui/kernels.
    (Whether a persistent cache is wanted at all is `cache_enabled()`'s answer.)"""
    if explicit:
        return Path(explicit).expanduser()
    value = _env(environ).get(CACHE_DIR_ENV)
    return Path(value).expanduser() if value else user_cache_home(environ) / "boo-tui" / "kernels"


def cache_key_file(environ: Mapping[str, str] | None = None) -> tuple[Path, bool]:
    """The key that signs the kernel cache's entries (compile/trust.py) and whether it is shared: $BOO_CACHE_KEY, a
    key file a team shares on purpose, else the user's own ~/.config/boo-tui/cache-key (outside every cache)."""
    value = (_env(environ).get(CACHE_KEY_ENV) or "").strip()
    if value:
        return Path(value).expanduser(), True
    return user_config_home(environ) / "boo-tui" / "cache-key", False


def linked_spec_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where tuning specs linked into one live: a stable place, because a cache entry's compile_command.sh
    refers to the linked file."""
    value = _env(environ).get(SPEC_CACHE_ENV)
    return Path(value).expanduser() if value else user_cache_home(environ) / "boo-tui" / "linked-specs"


def defaults_table(environ: Mapping[str, str] | None = None) -> Path | None:
    """The per-machine table of per-op-class CPU flags that `tune --defaults` writes and every cpu compile reads:
    $BOO_DEFAULTS_TABLE, else ~/.cache/boo-tui/cpu-defaults.json; None when $BOO_DEFAULTS_TABLE is 0/off/false/no
    (the feature-keyed rules alone decide)."""
    value = (_env(environ).get(DEFAULTS_TABLE_ENV) or "").strip()
    if value.lower() in _OFF:
        return None
    return Path(value).expanduser() if value else user_cache_home(environ) / "boo-tui" / "cpu-defaults.json"


def host_cpu_file(environ: Mapping[str, str] | None = None) -> Path:
    """Where the host CPU as iree-compile resolves it (LLVM's name and features) is remembered per compiler build:
    asking the compiler costs a ~0.2 s compile."""
    return user_cache_home(environ) / "boo-tui" / "host-cpu.json"


def peaks_file(environ: Mapping[str, str] | None = None) -> Path:
    """Where the machine's measured peaks are remembered (beside the results databases, which keep them too), so
    a fresh database reuses them without measuring again: $BOO_PEAKS_FILE, else ~/.cache/boo-tui/peaks.json."""
    value = (_env(environ).get(PEAKS_FILE_ENV) or "").strip()
    return Path(value).expanduser() if value else user_cache_home(environ) / "boo-tui" / "peaks.json"


def tuning_spec_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """$BOO_TUNING_SPEC_PATH, stripped; None when unset or empty."""
    return (_env(environ).get(TUNING_SPEC_ENV) or "").strip() or None


def turbine_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where scripts/setup.sh installs iree-turbine (pip --target), off sys.path: turbine registers torch.compile
    backends named iree_boo and iree_boo_inductor too, which would shadow ours in an environment holding both."""
    value = _env(environ).get(TURBINE_DIR_ENV)
    return Path(value).expanduser() if value else user_cache_home(environ) / "boo-tui" / "iree-turbine"


def kernels_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """$BOO_KERNELS, stripped and lower-cased: which kernels torch's calls get (best, boo); None when unset."""
    return (_env(environ).get(KERNELS_ENV) or "").strip().lower() or None


def child_log(environ: Mapping[str, str] | None = None) -> str | None:
    """The file child processes write their output to, if a front end asked for one."""
    return _env(environ).get(CHILD_LOG_ENV) or None


def debug(environ: Mapping[str, str] | None = None) -> bool:
    """BOO_DEBUG set: internal errors print their traceback."""
    return bool(_env(environ).get(DEBUG_ENV))
