"""Where variants come from: `--variant` values, TOML variants files, BOO_TUNING_SPEC_PATH; `build_variants` puts
a run's variants together (the baseline first) and refuses duplicate names."""
from __future__ import annotations

import dataclasses
import os
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path

from .. import locations
from ..errors import VariantError
from ..ops import FORMULATIONS
from ..results import CacheMode
from .common import BASELINE_NAME, BEST_NAME, NAME_RE, SPEC_SUFFIXES, TUNING_SPEC_ENV, one_line, safe_name
from .dispatches import substitutions_from_dir
from .variant import BASELINE, Variant

#: `--variant NAME=formulation=FORM`, and the TOML key
FORMULATION_KEY = "formulation"
#: `--variant NAME=cache=cold`, and the TOML key `cache`: measured with flushed (or warm) caches
CACHE_KEY = "cache"
#: `--variant NAME=base=ours`, and the TOML key `base`: the build the variant's change applies to (targets.BUILDS)
BASE_KEY = "base"


def parse_variant_arg(text: str, *, base_dir: str | os.PathLike[str] | None = None) -> Variant:
    """One `--variant` value -> Variant.

    Forms (NAME= is optional; without it the name comes from the spec's / folder's stem or the last flag):
      NAME=spec.mlir            a tuning spec (several: NAME="a.mlir b.mlir", linked in that order)
      NAME="--flag=v --other"   extra iree-compile flags (shell-split)
      NAME=DIR/                 a folder of edited dispatches written by --dump-dispatches
      NAME=formulation=FORM     the kernel written as FORM for export (e.g. fwdconv: a backward conv as forward
                                convolutions; `formulation=FORM` alone is named FORM)
      NAME=cache=cold           measured with the caches flushed before every call (`cache=cold` alone is named
                                cold): the baseline's kernel, cold vs warm as a compared column
      NAME=base=ours|boo        the build the change applies to (default: the run's, BOO's in a run of the front
                                ends): `ours` is our export with this machine's per-op defaults, what `boo-tui tune`
                                measures (`base=ours` alone, named ours, is that build as a column)
    Tokens may be mixed (NAME="spec.mlir --flag", NAME="formulation=fwdconv --flag"). Relative paths resolve
    against `base_dir` (default: cwd).
    """
    name, tokens = _name_and_tokens(text)
    label = name or text
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    parts = _ArgParts()
    for tok in tokens:
        parts.add(tok, base, f"variant {label}")
    if name is None:
        name = parts.default_name()
    v = _make(name, parts.specs, parts.flags, parts.subs, None, parts.kernels, where=f"variant {name}",
              formulation=parts.formulation)
    return dataclasses.replace(v, cache_mode=parts.cache_mode, base=parts.build)


#: the `KEY=VALUE` tokens of a `--variant` value that are settings, not paths (and not a variant's NAME=)
_SETTING_KEYS = (FORMULATION_KEY, CACHE_KEY, BASE_KEY)
#: the starts of a token that is shell-split again when it holds a space: flags and settings typed quoted
_SPLIT_AGAIN = ("-", *(key + "=" for key in _SETTING_KEYS))


def _name_and_tokens(text: str) -> tuple[str | None, list[str]]:
    """A `--variant` value -> (its NAME= or None, its shell-split tokens); VariantError when there are none."""
    raw = (text or "").strip()
    if not raw:
        raise VariantError("--variant: empty value (expected NAME=spec.mlir, NAME='--flag ...' or NAME=DIR/)")
    name: str | None = None
    head, eq, rest = raw.partition("=")
    if eq and not head.startswith("-") and NAME_RE.match(head.strip()) and head.strip() not in _SETTING_KEYS:
        name, raw = head.strip(), rest.strip()
    try:
        tokens = shlex.split(raw)
    except ValueError as e:
        raise VariantError(f"--variant {text!r}: {e}") from None
    # NAME="'--a --b'" (quotes kept, e.g. typed in the dashboard): the flags arrive as one quoted word
    tokens = [w for t in tokens for w in (shlex.split(t) if t.startswith(_SPLIT_AGAIN) and " " in t else [t])]
    if not tokens:
        raise VariantError(f"--variant {text!r}: nothing after '='")
    return name, tokens


@dataclasses.dataclass
class _ArgParts:
    """What the tokens of one `--variant` value add up to, token by token."""

    specs: list[str] = dataclasses.field(default_factory=list)
    flags: list[str] = dataclasses.field(default_factory=list)
    subs: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)
    kernels: list[str] = dataclasses.field(default_factory=list)
    dir_names: list[str] = dataclasses.field(default_factory=list)
    formulation: str | None = None
    cache_mode: CacheMode | None = None
    build: str | None = None

    def add(self, tok: str, base: Path, where: str) -> None:
        """One token: a compiler flag, a `base=` / `cache=` / `formulation=` setting, or a path."""
        if tok.startswith("-"):
            self.flags.append(tok)
        elif tok.startswith(BASE_KEY + "="):
            self.build = _base(tok.partition("=")[2], where)
        elif tok.startswith(CACHE_KEY + "="):
            self.cache_mode = _cache_mode(tok.partition("=")[2], where)
        elif tok.startswith(FORMULATION_KEY + "="):
            if self.formulation is not None:
                raise VariantError(f"{where}: formulation given twice ({self.formulation}, {tok})")
            self.formulation = _formulation(tok.partition("=")[2], where)
        else:
            self.add_path(tok, base, where)

    def add_path(self, tok: str, base: Path, where: str) -> None:
        """A path token: a dispatch folder (DIR/ or an existing folder) or a tuning spec; anything else is refused."""
        path = _abs(tok, base)
        if tok.endswith(("/", os.sep)) or path.is_dir():
            if not path.is_dir():
                raise VariantError(f"{where}: dispatch folder {path}: no such directory")
            found, kernel = substitutions_from_dir(path)
            self.subs += found
            self.kernels += [kernel] if kernel else []
            self.dir_names.append(path.name)
        elif path.suffix.lower() in SPEC_SUFFIXES:
            self.specs.append(str(path))
        elif path.suffix.lower() == ".toml":
            raise VariantError(f"{where}: {path} is a variants file: pass it with --variants-file")
        else:
            raise VariantError(
                f"{where}: {tok!r} is neither a tuning spec (.mlir), a dispatch folder (DIR/), a "
                "compiler flag (--flag=value) nor formulation=NAME")

    def default_name(self) -> str:
        """The name of a value without NAME=: its first spec's stem, folder, formulation, last flag or setting."""
        if self.specs:
            return safe_name(Path(self.specs[0]).stem)
        if self.dir_names:
            return safe_name(self.dir_names[0])
        if self.formulation and not self.flags:
            return safe_name(self.formulation)
        if not self.flags:
            return safe_name(self.cache_mode or self.build or "cache")
        last = self.flags[-1].lstrip("-").split("=", 1)[0]
        return safe_name(last.removeprefix("iree-") or "flags")


def load_variants_file(path: str | os.PathLike[str]) -> list[Variant]:
    """Variants from a TOML file: one table per variant, named by the table, with any of
        specs = ["a.mlir", ...] (or one string)      flags = ["--x=1", ...] (or one shell-split string)
        dispatches = "DIR"                           (a --dump-dispatches folder, as NAME=DIR/ on the CLI)
        substitute_sources = {EXE = "f.mlir"} | "DIR"    substitute_configurations = {EXE = "f.mlir"} | "DIR"
        preprocess = "builtin.module(canonicalize)" | "tool args"
        formulation = "fwdconv"                      (how the kernel is written for export)
        cache = "cold"                               (measured with the caches flushed before every call)
        base = "ours" | "boo"                        (the build the change applies to; default: the run's)
        [NAME.kernels.FUNC_NAME] flags = [...]  formulation = "..."   (that kernel only, as `boo-tui tune` writes)
                                 substitute_sources = {EXE = "f.mlir"}  substitute_configurations = {...}
    Paths are relative to the TOML file."""
    import tomllib

    p = Path(path).expanduser()
    try:
        data = tomllib.loads(p.read_text())
    except OSError as e:
        raise VariantError(f"variants file {p}: {e.strerror or e}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise VariantError(f"variants file {p}: {one_line(str(e))}") from None
    base = p.resolve().parent
    out: list[Variant] = []
    for name, table in data.items():
        where = f"variants file {p}: variant {name!r}"
        if not isinstance(table, dict):
            raise VariantError(f"{where}: expected a table [{name}], got a {type(table).__name__}")
        if not NAME_RE.match(name):
            raise VariantError(f"{where}: a name is letters, digits and _.:+@%- (at most 64, no spaces)")
        out.append(_variant_from_table(name, table, base, where))
    if not out:
        raise VariantError(f"variants file {p}: no variants (expected one [name] table per variant)")
    return out


_TABLE_KEYS = ("specs", "flags", "dispatches", "substitute_sources", "substitute_configurations", "preprocess",
               "formulation", "kernels", "cache", "base")


def _variant_from_table(name: str, t: Mapping[str, object], base: Path, where: str) -> Variant:
    """One variants-file table -> Variant; VariantError naming the first problem found."""
    unknown = [k for k in t if k not in _TABLE_KEYS]
    if unknown:
        raise VariantError(f"{where}: unknown key {unknown[0]!r} (expected {', '.join(_TABLE_KEYS)})")
    specs = [str(_abs(s, base)) for s in _str_list(t.get("specs", []), where, "specs", split=False)]
    flags = _str_list(t.get("flags", []), where, "flags", split=True)
    bad = [f for f in flags if not f.startswith("-")]
    if bad:
        raise VariantError(f"{where}: flag {bad[0]!r} does not start with '-' (write --flag=value)")
    subs, kernels = _table_substitutions(t, base, where)
    v = _make(name, specs, flags, subs, _table_preprocess(t, where), kernels, where=where,
              formulation=_table_formulation(t, where))
    per_kernel, forms, ksubs = _kernel_tables(t.get("kernels"), where, base)
    if per_kernel or forms or ksubs:
        v = dataclasses.replace(v, kernel_flags=per_kernel, kernel_formulations=forms, kernel_substitutions=ksubs)
    mode = _table_str(t, CACHE_KEY, where, "\"warm\" or \"cold\"")
    if mode is not None:
        v = dataclasses.replace(v, cache_mode=_cache_mode(mode, where))
    build = _table_str(t, BASE_KEY, where, "\"ours\" or \"boo\"")
    if build is not None:
        v = dataclasses.replace(v, base=_base(build, where))
    if v.is_baseline:
        raise VariantError(f"{where}: defines nothing (give specs, flags, dispatches, substitutions, preprocess, "
                           "formulation, cache or base)")
    return v


def _table_substitutions(t: Mapping[str, object], base: Path, where: str
                         ) -> tuple[list[tuple[str, str, str]], list[str]]:
    """A table's `dispatches`, then `substitute_sources`, then `substitute_configurations` -> (subs, kernels)."""
    found: list[tuple[list[tuple[str, str, str]], str | None]] = []   # (subs, kernel) of each key, in order
    if "dispatches" in t:
        if not isinstance(t["dispatches"], str):
            raise VariantError(f"{where}: dispatches must be a folder path string")
        found.append(substitutions_from_dir(_abs(t["dispatches"], base)))
    for key, kind in (("substitute_sources", "source"), ("substitute_configurations", "configuration")):
        if t.get(key) is not None:
            found.append(_table_substitutions_of(key, kind, t[key], base, where))
    return [sub for subs, _ in found for sub in subs], [kernel for _, kernel in found if kernel]


def _table_substitutions_of(key: str, kind: str, value: object, base: Path, where: str
                            ) -> tuple[list[tuple[str, str, str]], str | None]:
    """One `substitute_*` key's value (a folder, or a table {EXE = "file.mlir"}) -> (subs, the folder's kernel)."""
    if isinstance(value, str):
        return substitutions_from_dir(_abs(value, base), kinds=(kind,))
    if not isinstance(value, dict):
        raise VariantError(f"{where}: {key} must be a table {{executable = \"file.mlir\"}} or a folder")
    subs: list[tuple[str, str, str]] = []
    for exe, f in value.items():
        if not isinstance(f, str):
            raise VariantError(f"{where}: {key}.{exe} must be a file path string")
        subs.append((kind, str(exe), str(_abs(f, base))))
    return subs, None


def _table_preprocess(t: Mapping[str, object], where: str) -> str | None:
    """A table's `preprocess` (a non-empty string), stripped; None when not given."""
    pre = t.get("preprocess")
    if pre is not None and not (isinstance(pre, str) and pre.strip()):
        raise VariantError(f"{where}: preprocess must be a non-empty string")
    return pre.strip() if pre else None


def _table_formulation(t: Mapping[str, object], where: str) -> str | None:
    """A table's `formulation` (one some kernel has); None when not given."""
    form = t.get(FORMULATION_KEY)
    if form is not None and not isinstance(form, str):
        raise VariantError(f"{where}: formulation must be a string (one of {', '.join(FORMULATIONS)})")
    return None if form is None else _formulation(form, where)


def _table_str(t: Mapping[str, object], key: str, where: str, expected: str) -> str | None:
    """A table's string setting `key` (`cache`, `base`), not yet checked against `expected`; None when not given."""
    value = t.get(key)
    if value is not None and not isinstance(value, str):
        raise VariantError(f"{where}: {key} must be {expected}")
    return value


KernelTables = tuple[tuple[tuple[str, tuple[str, ...]], ...], tuple[tuple[str, str], ...],
                     tuple[tuple[str, str, str, str], ...]]
_KERNEL_KEYS = {"flags", "formulation", "substitute_sources", "substitute_configurations"}


def _kernel_tables(value: object, where: str, base: Path) -> KernelTables:
    """`[NAME.kernels.FUNC] flags = [...]  formulation = "..."  substitute_sources = {EXE = "f.mlir"}` tables ->
    ((func, flags), ...), ((func, form), ...), ((func, kind, exe, path), ...)."""
    if value is None:
        return (), (), ()
    if not isinstance(value, dict):
        raise VariantError(f"{where}: kernels must be tables [NAME.kernels.FUNC_NAME] with flags = [...]")
    flags_out, forms, subs = [], [], []
    for func, table in value.items():
        if not isinstance(table, dict) or set(table) - _KERNEL_KEYS:
            raise VariantError(f"{where}: kernels.{func}: expected a table with flags = [...], formulation and/or "
                               "substitute_sources / substitute_configurations = {EXE = \"file.mlir\"}")
        for key, kind in (("substitute_sources", "source"), ("substitute_configurations", "configuration")):
            table_of = table.get(key, {})
            if not isinstance(table_of, dict) or not all(isinstance(f, str) for f in table_of.values()):
                raise VariantError(f"{where}: kernels.{func}.{key} must be a table {{EXE = \"file.mlir\"}}")
            subs += [(str(func), kind, str(exe), str(_abs(f, base))) for exe, f in table_of.items()]
        flags = _str_list(table.get("flags", []), where, f"kernels.{func}.flags", split=True)
        bad = [f for f in flags if not f.startswith("-")]
        if bad:
            raise VariantError(f"{where}: kernels.{func}: flag {bad[0]!r} does not start with '-'")
        if flags:
            flags_out.append((str(func), tuple(flags)))
        form = table.get("formulation")
        if form is not None:
            if not isinstance(form, str) or not form.strip():
                raise VariantError(f"{where}: kernels.{func}: formulation must be a non-empty string")
            forms.append((str(func), _formulation(form, f"{where}: kernels.{func}")))
    return tuple(flags_out), tuple(forms), tuple(subs)


def variant_from_env(environ: dict[str, str] | None = None) -> Variant | None:
    """The variant BOO_TUNING_SPEC_PATH asks for (named after the spec's stem), or None when unset/empty."""
    value = locations.tuning_spec_from_env(environ)
    if not value:
        return None
    path = _abs(value, Path.cwd())
    if path.is_dir():
        raise VariantError(f"{TUNING_SPEC_ENV}={value}: {path} is a directory, not a tuning spec file")
    if not path.is_file():
        raise VariantError(f"{TUNING_SPEC_ENV}={value}: tuning spec {path} not found")
    return Variant(name=safe_name(path.stem), tuning_specs=(str(path),))


def build_variants(cli_args: Iterable[str] | None, files: Iterable[str] | str | None = None, *,
                   include_baseline: bool = True) -> list[Variant]:
    """The variants of a run: the baseline first (unless include_baseline is False), then every `--variant`,
    then every variants file's tables, in order. Duplicate names are a VariantError."""
    out: list[Variant] = [BASELINE] if include_baseline else []
    for arg in cli_args or ():
        out.append(parse_variant_arg(arg))
    if isinstance(files, (str, os.PathLike)):
        files = [files]
    for f in files or ():
        out.extend(load_variants_file(f))
    check_names(out)
    return out


def check_names(variants: Iterable[Variant]) -> None:
    """VariantError for a name given twice, or a reserved one taken by another variant: `baseline` (the run's
    baseline) and `best` (its best-known column)."""
    seen: set[str] = set()
    for v in variants:
        reserved = (v.name == BASELINE_NAME and not v.is_baseline) or (v.name == BEST_NAME and not v.best)
        if v.name in seen or reserved:
            why = {BASELINE_NAME: "is reserved for the baseline", BEST_NAME: "is reserved for the best known kernels"}
            said = why[v.name] if reserved else "is given twice"
            raise VariantError(f"variant name {v.name!r} {said}: give each variant its own name")
        seen.add(v.name)


def _make(name: str, specs: list[str], flags: list[str], subs: list[tuple[str, str, str]], pre: str | None,
          kernels: list[str], *, where: str, formulation: str | None = None) -> Variant:
    if not NAME_RE.match(name):
        raise VariantError(f"{where}: bad name {name!r} (letters, digits and _.:+@%-, at most 64, no spaces)")
    seen: dict[str, str] = {}
    for kind, exe, _path in subs:
        if exe in seen:
            what = "twice" if seen[exe] == kind else "as both source and configuration"
            raise VariantError(
                f"{where}: executable {exe} is substituted {what}; keep one edited file per dispatch "
                "(a configuration substitution would silently discard a source edit)")
        seen[exe] = kind
    return Variant(name=name, tuning_specs=tuple(specs), flags=tuple(flags), substitutions=tuple(subs),
                   preprocess=pre, kernels=tuple(dict.fromkeys(kernels)), formulation=formulation)


def _formulation(value: str, where: str) -> str:
    """A formulation name some kernel has (which kernels have it is checked when each one compiles)."""
    form = value.strip()
    if form not in FORMULATIONS:
        raise VariantError(f"{where}: unknown formulation {form!r} (kernels have: {', '.join(FORMULATIONS)})")
    return form


def _base(value: str, where: str) -> str:
    from ..targets import BUILDS

    build = value.strip().lower()
    if build not in BUILDS:
        raise VariantError(f"{where}: base={value!r}: expected {' or '.join(f'base={b}' for b in BUILDS)}")
    return build


def _cache_mode(value: str, where: str) -> CacheMode:
    mode = value.strip().lower()
    if mode not in tuple(CacheMode):
        raise VariantError(f"{where}: cache={value!r}: expected cache=cold or cache=warm")
    return CacheMode(mode)


def _str_list(value: object, where: str, key: str, *, split: bool) -> list[str]:
    if isinstance(value, str):
        if not split:
            return [value]
        try:
            return shlex.split(value)
        except ValueError as e:
            raise VariantError(f"{where}: {key}: {e}") from None
    if isinstance(value, list) and all(isinstance(x, str) for x in value):
        return list(value)
    raise VariantError(f"{where}: {key} must be a string or a list of strings")


def _abs(path: str | os.PathLike[str], base: Path) -> Path:
    p = Path(os.path.expandvars(str(path))).expanduser()
    return (p if p.is_absolute() else base / p).resolve()
