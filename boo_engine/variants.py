"""Variants: named compile configurations of the same kernel (tuning specs, extra compiler flags, substituted
dispatch sources or configurations, a preprocessing step). The baseline is `Variant()`.

Why this module does more than hold data: every way of changing a kernel has a SILENT failure mode in IREE 3.13,
and a benchmark that quietly measures the baseline twice is worse than no benchmark. So:
- a spec is pre-flighted (`iree-opt` parses and verifies it in ~0.2 s) and must have an entry point, because a
  spec without one compiles fine and is ignored;
- after compiling, `spec_applied()` reads the dumped executable configurations: a spec that matched nothing
  also compiles fine and changes nothing;
- a dispatch folder only substitutes the files the user actually edited (a dump manifest records the
  originals), because substituting an unchanged configuration next to an edited source silently discards the
  source edit (the configuration substitution happens later in the pipeline and wins);
- flags are checked against the compiler's own option list, because a typo is otherwise one compile error per
  kernel.

IREE takes ONE `--iree-codegen-tuning-spec-path`; several specs in one variant are linked into one with IREE's
own `iree-codegen-link-tuning-specs` pass (`merged_spec_path`), in the order given (the first matching spec wins
for an op).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from . import locations
from .errors import CompileError, VariantError

if TYPE_CHECKING:  # pragma: no cover
    from .ops.base import OpSignature
    from .targets import Target

BASELINE_NAME = "baseline"
#: the attribute our specs put on every op they configure, so "did it apply?" needs no guesswork
SPEC_MARKER = "__tuning_spec_applied__"
#: the env var iree-boo-driver reads a tuning spec from
TUNING_SPEC_ENV = locations.TUNING_SPEC_ENV
#: written by dump_dispatches next to the dumped files: which kernel, and the digest of every original file
DUMP_MANIFEST = "boo-dump.json"
SPEC_SUFFIXES = (".mlir", ".mlirbc")
KINDS = ("source", "configuration")

_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:+@%-]{0,63}$")


@dataclass(frozen=True)
class Variant:
    name: str = BASELINE_NAME
    #: tuning spec files (absolute paths). IREE takes one --iree-codegen-tuning-spec-path per compile: several
    #: are linked into one file by `merged_spec_path` (first matching spec wins)
    tuning_specs: tuple[str, ...] = ()
    #: extra iree-compile flags, verbatim
    flags: tuple[str, ...] = ()
    #: ("source" | "configuration", executable_name, path) substitutions of single dispatches
    substitutions: tuple[tuple[str, str, str], ...] = ()
    #: --iree-hal-preprocess-executables-with value
    preprocess: str | None = None
    #: kernels (func_name) this variant is meant for; empty = every kernel. Substituted dispatches are named
    #: `main$async_dispatch_N` in EVERY kernel, so a dispatch folder only makes sense for the kernel it was
    #: dumped from: callers should skip a variant whose `applies_to(func_name)` is False.
    kernels: tuple[str, ...] = ()

    @property
    def is_baseline(self) -> bool:
        return not (self.tuning_specs or self.flags or self.substitutions or self.preprocess)

    def applies_to(self, func_name: str) -> bool:
        """False when this variant is scoped to other kernels (a dispatch folder dumped from another kernel)."""
        return not self.kernels or func_name in self.kernels

    def compile_flags(self) -> list[str]:
        flags: list[str] = []
        if len(self.tuning_specs) == 1:
            flags.append(f"--iree-codegen-tuning-spec-path={self.tuning_specs[0]}")
        elif self.tuning_specs:
            flags.append(f"--iree-codegen-tuning-spec-path={merged_spec_path(self.tuning_specs)}")
        for kind, name, path in self.substitutions:
            flags.append(f"--iree-hal-substitute-executable-{kind}={name}={path}")
        if self.preprocess:
            flags.append(f"--iree-hal-preprocess-executables-with={self.preprocess}")
        flags.extend(self.flags)
        return flags

    def key_material(self) -> str:
        """Digest of everything about this variant that changes the compiled artifact: the CONTENT of spec and
        substituted files (not just their paths), the flags and the preprocess step."""
        h = hashlib.sha256()
        for spec in self.tuning_specs:
            h.update(b"spec\0" + _file_bytes(spec) + b"\0")
        for kind, name, path in self.substitutions:
            h.update(f"sub\0{kind}\0{name}\0".encode() + _file_bytes(path) + b"\0")
        h.update(("preprocess\0" + (self.preprocess or "")).encode() + b"\0")
        for f in self.flags:
            h.update(b"flag\0" + f.encode() + b"\0")
        return h.hexdigest()

    def describe(self) -> dict:
        d: dict[str, Any] = {
            "name": self.name,
            "tuning_specs": list(self.tuning_specs),
            "flags": list(self.flags),
            "substitutions": [list(s) for s in self.substitutions],
            "preprocess": self.preprocess,
        }
        if self.kernels:
            d["kernels"] = list(self.kernels)
        return d


BASELINE = Variant()


def _file_bytes(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise VariantError(f"variant file {path}: {e.strerror or e}") from None


# ==== parsing ===============================================================================================

def parse_variant_arg(text: str, *, base_dir: str | os.PathLike | None = None) -> Variant:
    """One `--variant` value -> Variant.

    Forms (NAME= is optional; without it the name comes from the spec's / folder's stem or the last flag):
      NAME=spec.mlir            a tuning spec (several: NAME="a.mlir b.mlir", linked in that order)
      NAME="--flag=v --other"   extra iree-compile flags (shell-split)
      NAME=DIR/                 a folder of edited dispatches written by --dump-dispatches
    Tokens may be mixed (NAME="spec.mlir --flag"). Relative paths resolve against `base_dir` (default: cwd).
    """
    raw = (text or "").strip()
    if not raw:
        raise VariantError("--variant: empty value (expected NAME=spec.mlir, NAME='--flag ...' or NAME=DIR/)")
    name: str | None = None
    head, eq, rest = raw.partition("=")
    if eq and not head.startswith("-") and _NAME_RE.match(head.strip()):
        name, raw = head.strip(), rest.strip()
    try:
        tokens = shlex.split(raw)
    except ValueError as e:
        raise VariantError(f"--variant {text!r}: {e}") from None
    # NAME="'--a --b'" (quotes kept, e.g. typed in the dashboard): the flags arrive as one quoted word
    tokens = [w for t in tokens for w in (shlex.split(t) if t.startswith("-") and " " in t else [t])]
    if not tokens:
        raise VariantError(f"--variant {text!r}: nothing after '='")
    label = name or text
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    specs: list[str] = []
    flags: list[str] = []
    subs: list[tuple[str, str, str]] = []
    kernels: list[str] = []
    dir_names: list[str] = []
    for tok in tokens:
        if tok.startswith("-"):
            flags.append(tok)
            continue
        path = _abs(tok, base)
        if tok.endswith(("/", os.sep)) or path.is_dir():
            if not path.is_dir():
                raise VariantError(f"variant {label}: dispatch folder {path}: no such directory")
            found, kernel = substitutions_from_dir(path)
            subs += found
            kernels += [kernel] if kernel else []
            dir_names.append(path.name)
        elif path.suffix.lower() in SPEC_SUFFIXES:
            specs.append(str(path))
        elif path.suffix.lower() == ".toml":
            raise VariantError(f"variant {label}: {path} is a variants file: pass it with --variants-file")
        else:
            raise VariantError(
                f"variant {label}: {tok!r} is neither a tuning spec (.mlir), a dispatch folder (DIR/) nor a "
                "compiler flag (--flag=value)")
    if name is None:
        name = _default_name(specs, dir_names, flags)
    return _make(name, specs, flags, subs, None, kernels, where=f"variant {name}")


def load_variants_file(path: str | os.PathLike) -> list[Variant]:
    """Variants from a TOML file: one table per variant, named by the table, with any of
        specs = ["a.mlir", ...] (or one string)      flags = ["--x=1", ...] (or one shell-split string)
        dispatches = "DIR"                           (a --dump-dispatches folder, as NAME=DIR/ on the CLI)
        substitute_sources = {EXE = "f.mlir"} | "DIR"    substitute_configurations = {EXE = "f.mlir"} | "DIR"
        preprocess = "builtin.module(canonicalize)" | "tool args"
    Paths are relative to the TOML file."""
    import tomllib

    p = Path(path).expanduser()
    try:
        data = tomllib.loads(p.read_text())
    except OSError as e:
        raise VariantError(f"variants file {p}: {e.strerror or e}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise VariantError(f"variants file {p}: {_one_line(str(e))}") from None
    base = p.resolve().parent
    out: list[Variant] = []
    for name, table in data.items():
        where = f"variants file {p}: variant {name!r}"
        if not isinstance(table, dict):
            raise VariantError(f"{where}: expected a table [{name}], got a {type(table).__name__}")
        if not _NAME_RE.match(name):
            raise VariantError(f"{where}: a name is letters, digits and _.:+@%- (at most 64, no spaces)")
        out.append(_variant_from_table(name, table, base, where))
    if not out:
        raise VariantError(f"variants file {p}: no variants (expected one [name] table per variant)")
    return out


_TABLE_KEYS = ("specs", "flags", "dispatches", "substitute_sources", "substitute_configurations", "preprocess")


def _variant_from_table(name: str, t: dict, base: Path, where: str) -> Variant:
    unknown = [k for k in t if k not in _TABLE_KEYS]
    if unknown:
        raise VariantError(f"{where}: unknown key {unknown[0]!r} (expected {', '.join(_TABLE_KEYS)})")
    specs = [str(_abs(s, base)) for s in _str_list(t.get("specs", []), where, "specs", split=False)]
    flags = _str_list(t.get("flags", []), where, "flags", split=True)
    bad = [f for f in flags if not f.startswith("-")]
    if bad:
        raise VariantError(f"{where}: flag {bad[0]!r} does not start with '-' (write --flag=value)")
    subs: list[tuple[str, str, str]] = []
    kernels: list[str] = []
    if "dispatches" in t:
        d = t["dispatches"]
        if not isinstance(d, str):
            raise VariantError(f"{where}: dispatches must be a folder path string")
        found, kernel = substitutions_from_dir(_abs(d, base))
        subs += found
        kernels += [kernel] if kernel else []
    for key, kind in (("substitute_sources", "source"), ("substitute_configurations", "configuration")):
        value = t.get(key)
        if value is None:
            continue
        if isinstance(value, str):
            found, kernel = substitutions_from_dir(_abs(value, base), kinds=(kind,))
            subs += found
            kernels += [kernel] if kernel else []
        elif isinstance(value, dict):
            for exe, f in value.items():
                if not isinstance(f, str):
                    raise VariantError(f"{where}: {key}.{exe} must be a file path string")
                subs.append((kind, str(exe), str(_abs(f, base))))
        else:
            raise VariantError(f"{where}: {key} must be a table {{executable = \"file.mlir\"}} or a folder")
    pre = t.get("preprocess")
    if pre is not None and not (isinstance(pre, str) and pre.strip()):
        raise VariantError(f"{where}: preprocess must be a non-empty string")
    v = _make(name, specs, flags, subs, pre.strip() if pre else None, kernels, where=where)
    if v.is_baseline:
        raise VariantError(f"{where}: defines nothing (give specs, flags, dispatches, substitutions or preprocess)")
    return v


def variant_from_env(environ: dict[str, str] | None = None) -> Variant | None:
    """The variant BOO_TUNING_SPEC_PATH asks for (named after the spec's stem), or None when unset/empty."""
    value = locations.tuning_spec_from_env(environ)
    if not value:
        return None
    path = _abs(value, Path.cwd())
    if not path.is_file():
        raise VariantError(f"{TUNING_SPEC_ENV}={value}: tuning spec {path} not found")
    return Variant(name=_safe_name(path.stem), tuning_specs=(str(path),))


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
    seen: set[str] = set()
    for v in out:
        if v.name in seen or (v.name == BASELINE_NAME and not v.is_baseline):
            why = "is reserved for the compiler defaults" if v.name == BASELINE_NAME else "is given twice"
            raise VariantError(f"variant name {v.name!r} {why}: give each variant its own name")
        seen.add(v.name)
    return out


def _make(name: str, specs: list[str], flags: list[str], subs: list[tuple[str, str, str]], pre: str | None,
          kernels: list[str], *, where: str) -> Variant:
    if not _NAME_RE.match(name):
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
                   preprocess=pre, kernels=tuple(dict.fromkeys(kernels)))


def _str_list(value: Any, where: str, key: str, *, split: bool) -> list[str]:
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


def _abs(path: str | os.PathLike, base: Path) -> Path:
    p = Path(os.path.expandvars(str(path))).expanduser()
    return (p if p.is_absolute() else base / p).resolve()


def _default_name(specs: list[str], dirs: list[str], flags: list[str]) -> str:
    if specs:
        return _safe_name(Path(specs[0]).stem)
    if dirs:
        return _safe_name(dirs[0])
    last = flags[-1].lstrip("-").split("=", 1)[0]
    return _safe_name(last.removeprefix("iree-") or "flags")


def _safe_name(text: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.:+@%-]", "_", text)[:64].lstrip("-.") or "variant"
    return name


def _one_line(text: str) -> str:
    return " ".join(text.split())


# ==== tools ===================================================================================================

@functools.lru_cache(maxsize=None)
def _tool(name: str) -> str:
    """Absolute path of an IREE tool from the installed iree-base-compiler wheel, else from PATH."""
    import importlib.util

    spec = importlib.util.find_spec("iree.compiler")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        exe = Path(loc) / "_mlir_libs" / name
        if exe.is_file():
            return str(exe)
    exe = shutil.which(name)
    if not exe:
        raise VariantError(f"{name} not found: install iree-base-compiler")
    return exe


def _run_tool(args: list[str], timeout_s: float = 60.0) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise VariantError(f"{Path(args[0]).name} timed out after {timeout_s:.0f} s on {args[-1]}") from None


def _compiler_error(stderr: str, path: str | os.PathLike) -> str:
    """The first `error:` of an MLIR tool's output as one line, with `path:` shortened to `line L:C:`."""
    for line in stderr.splitlines():
        if "error:" in line:
            loc, _, msg = line.partition("error:")
            m = re.search(r":(\d+):(\d+):\s*$", loc)
            where = f"line {m.group(1)}:{m.group(2)}: " if m else ""
            return f"{where}{msg.strip()}"
    rest = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    return rest[0] if rest else "rejected by the compiler (no message)"


# ==== pre-flight ==============================================================================================

def preflight_spec(path: str | os.PathLike) -> None:
    """Fail early, with one line naming the file and the compiler's reason, on a spec IREE would reject OR
    silently ignore: missing/unreadable, unparsable, invalid transform IR (iree-opt verifies it in ~0.2 s; the
    compiler would run the same verifier at compile time, once per kernel), or no entry point (IREE compiles
    such a spec without a word and applies nothing). Results are cached per file content."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except IsADirectoryError:
        raise VariantError(f"tuning spec {p}: is a directory, not a .mlir file") from None
    except OSError as e:
        raise VariantError(f"tuning spec {p}: {e.strerror or e}") from None
    problem = _spec_problem(str(p), hashlib.sha256(data).hexdigest())
    if problem:
        raise VariantError(f"tuning spec {p}: {problem}")


@functools.lru_cache(maxsize=256)
def _spec_problem(path: str, _digest: str) -> str | None:
    proc = _run_tool([_tool("iree-opt"), "--mlir-print-local-scope", path])
    if proc.returncode != 0:
        return _compiler_error(proc.stderr, path)
    text = proc.stdout
    if "transform.with_named_sequence" not in text:
        return "not a transform library: the top module needs the transform.with_named_sequence attribute"
    if "iree_codegen.tuning_spec_entrypoint" not in text:
        return ("no entry point: IREE would silently ignore this spec; add iree_codegen.tuning_spec_with_default_"
                "entrypoint to the module and a @__kernel_config named sequence with the "
                "iree_codegen.tuning_spec_entrypoint attribute")
    return None


def spec_has_marker(path: str | os.PathLike) -> bool:
    """Does the spec annotate what it configures with SPEC_MARKER (the reliable "did it apply?" signal)?"""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return False
    code = re.sub(r"//[^\n]*", "", text)  # a comment that mentions the marker does not set it
    return re.search(r'transform\.annotate\s+%[\w$.-]+\s+"' + SPEC_MARKER + '"', code) is not None


def spec_backend(path: str | os.PathLike) -> str | None:
    """"cpu" or "gpu" when every configuration the spec sets is of that kind (#iree_cpu / #iree_gpu
    lowering_config), None when it sets neither or both."""
    try:
        code = re.sub(r"//[^\n]*", "", Path(path).read_text(errors="replace"))
    except OSError:
        return None
    cpu, gpu = "#iree_cpu.lowering_config" in code, "#iree_gpu.lowering_config" in code
    return "cpu" if cpu and not gpu else "gpu" if gpu and not cpu else None


def preflight_variant(v: Variant, target: "Target | str | None" = None) -> None:
    """Check everything a variant names before any compile: specs (and their linking, when several), the
    substituted files (exist, parse, hold the named executable), the flags (known to this iree-compile) and
    the preprocess tool (on PATH). With a `target`, a spec that only sets GPU configurations is refused for the
    cpu target and vice versa (it would match and then fail to compile, once per kernel). Raises VariantError
    naming the variant and the file."""
    kind = None
    if target is not None:
        kind = (target if isinstance(target, str) else target.name).split(":", 1)[0].lower()
        kind = "cpu" if kind in ("cpu", "llvm-cpu", "host") else "gpu"
    try:
        for spec in v.tuning_specs:
            preflight_spec(spec)
            made_for = spec_backend(spec)
            if kind and made_for and made_for != kind:
                raise VariantError(f"tuning spec {spec}: sets #iree_{made_for}.lowering_config, written for "
                                   f"{made_for.upper()} targets, but the target is {target}")
        if len(v.tuning_specs) > 1:
            merged_spec_path(v.tuning_specs)
        for kind, exe, path in v.substitutions:
            _preflight_substitution(kind, exe, path)
        _preflight_flags(v.flags)
        if v.preprocess:
            _preflight_preprocess(v.preprocess)
    except VariantError as e:
        msg = str(e)
        raise VariantError(msg if msg.startswith(f"variant {v.name}") else f"variant {v.name}: {msg}") from None


def _preflight_substitution(kind: str, exe: str, path: str) -> None:
    if kind not in KINDS:
        raise VariantError(f"substitution {path}: kind {kind!r} is not one of {', '.join(KINDS)}")
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as e:
        raise VariantError(f"substituted {kind} {path}: {e.strerror or e}") from None
    if _executable_name(text) != exe:
        raise VariantError(f"substituted {kind} {path}: holds no hal.executable @{exe}")
    proc = _run_tool([_tool("iree-opt"), path])
    if proc.returncode != 0:
        raise VariantError(f"substituted {kind} {path}: {_compiler_error(proc.stderr, path)}")


@functools.lru_cache(maxsize=1)
def _known_compiler_options() -> frozenset[str]:
    proc = _run_tool([_tool("iree-compile"), "--help-list-hidden"])
    return frozenset(re.findall(r"^\s{2,}(--?[A-Za-z0-9][\w.-]*)", proc.stdout, flags=re.M))


def _preflight_flags(flags: Sequence[str]) -> None:
    if not flags:
        return
    known = _known_compiler_options()
    for f in flags:
        if not f.startswith("-"):
            raise VariantError(f"flag {f!r} does not start with '-' (write --flag=value)")
        opt = f.split("=", 1)[0]
        bare = opt.lstrip("-")
        if bare in ("o", "compile-to", "compile-from", "output-format"):
            raise VariantError(f"flag {f}: the tool controls the output; remove it from the variant")
        if known and f"--{bare}" not in known and f"-{bare}" not in known:
            raise VariantError(f"flag {f}: iree-compile has no option {opt} (see iree-compile --help-hidden)")


def _preflight_preprocess(value: str) -> None:
    if value.startswith("builtin.module(") or value.startswith("func.func("):
        return  # a pass pipeline, checked by the compiler itself
    tool = shlex.split(value)[0] if value.strip() else ""
    if "/" in tool:
        raise VariantError(f"preprocess {value!r}: IREE looks the tool up on PATH and mangles paths; "
                           "put it on PATH and give its bare name")
    if not shutil.which(tool):
        raise VariantError(f"preprocess {value!r}: {tool} is not on PATH")


# ==== several specs in one variant ============================================================================

def spec_cache_dir() -> Path:
    """Where linked specs live ($BOO_SPEC_CACHE_DIR, else ~/.cache/boo-tui/linked-specs): a stable place,
    because the kernel cache's compile_command.sh refers to the linked file."""
    return locations.linked_spec_dir()


def merged_spec_path(specs: Sequence[str]) -> str:
    """One spec file equivalent to `specs` (nested as modules and linked by IREE's
    `iree-codegen-link-tuning-specs` pass into a single @__kernel_config whose foreach_match tries the specs'
    matchers in the order given). Content-addressed, so it is made once per combination."""
    blobs = [_file_bytes(s) for s in specs]
    digest = hashlib.sha256(b"\0".join(hashlib.sha256(b).digest() for b in blobs)).hexdigest()[:24]
    out = spec_cache_dir() / f"linked-{digest}.mlir"
    if out.is_file():
        return str(out)
    for s in specs:
        preflight_spec(s)
    parts = []
    for i, s in enumerate(specs):
        proc = _run_tool([_tool("iree-opt"), "--mlir-print-local-scope", s])
        body = proc.stdout.strip()
        body, n = re.subn(r"^module(\s+@[\w$.\"-]+)?", f"module @boo_spec_{i}", body, count=1)
        if n != 1:
            raise VariantError(f"tuning spec {s}: the file's top-level operation is not a module")
        parts.append(body)
    nested = "module attributes {transform.with_named_sequence} {\n" + "\n".join(parts) + "\n}\n"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError:  # read-only home (CI): a temp folder still works for this process's compiles
        out = Path(tempfile.gettempdir()) / "boo-tui-linked-specs" / out.name
        out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        src = Path(tmp) / "nested.mlir"
        src.write_text(nested)
        proc = _run_tool([_tool("iree-opt"), "--iree-codegen-link-tuning-specs", str(src)])
        if proc.returncode != 0 or "iree_codegen.tuning_spec_entrypoint" not in proc.stdout:
            why = _compiler_error(proc.stderr, src) if proc.returncode else "no entry point after linking"
            raise VariantError(f"tuning specs {', '.join(specs)}: cannot link them into one: {why}")
        header = "// linked by boo-tui from, in order (first match wins):\n" + "".join(
            f"//   {s}\n" for s in specs)
        staged = Path(tmp) / "linked.mlir"
        staged.write_text(header + proc.stdout)
        os.replace(staged, out)
    return str(out)


# ==== did the spec apply? =====================================================================================

@dataclass(frozen=True)
class AppliedCheck:
    applied: bool
    detail: str
    #: executables whose configuration shows the spec (marker, or a configuration differing from the baseline)
    dispatches: tuple[str, ...] = ()


NOT_APPLIED = "spec not applied: matched no dispatch"


def spec_applied(variant_configs_dir: str | os.PathLike | None, baseline_configs_dir: str | os.PathLike | None,
                 spec_paths: Sequence[str]) -> AppliedCheck:
    """Decide from the dumped executable configurations (--iree-hal-dump-executable-configurations-to) whether
    the spec(s) changed the kernel. Evidence, strongest first:
    1. SPEC_MARKER on an op in the variant's configurations -> applied (it survives into 3.13's dumps);
    2. every spec carries the marker but none shows -> not applied;
    3. with a baseline: a lowering_config / translation_info differing from the baseline's -> applied;
    4. without one: one of the specs' lowering_configs appearing in the dumps -> applied.
    A spec that matched nothing comes out `applied=False`, detail "spec not applied: matched no dispatch"."""
    if not spec_paths:
        return AppliedCheck(True, "no tuning spec")
    variant = _read_configs(variant_configs_dir)
    if not variant:
        return AppliedCheck(False, f"cannot tell: no executable configurations dumped in {variant_configs_dir}")
    marked = tuple(exe for exe, text in variant.items() if SPEC_MARKER in text)
    if marked:
        return AppliedCheck(True, f"spec applied to {len(marked)} of {len(variant)} dispatches: "
                                  f"{', '.join(marked)}", marked)
    if all(spec_has_marker(s) for s in spec_paths):
        return AppliedCheck(False, NOT_APPLIED)
    baseline = _read_configs(baseline_configs_dir)
    if baseline:
        changed = tuple(exe for exe, text in variant.items()
                        if _config_signature(text) != _config_signature(baseline.get(exe, "")))
        if changed:
            return AppliedCheck(True, f"configuration differs from the baseline in {len(changed)} of "
                                      f"{len(variant)} dispatches: {', '.join(changed)}", changed)
        return AppliedCheck(False, NOT_APPLIED)
    wanted = set()
    for s in spec_paths:
        try:
            wanted |= set(_lowering_configs(_resolve_aliases(Path(s).read_text(errors="replace"))))
        except OSError:
            pass
    hits = tuple(exe for exe, text in variant.items() if wanted & set(_lowering_configs(text)))
    if hits:
        return AppliedCheck(True, f"the spec's lowering_config appears in {', '.join(hits)}", hits)
    return AppliedCheck(False, NOT_APPLIED)


def _read_configs(folder: str | os.PathLike | None) -> dict[str, str]:
    """{executable name: configuration text with aliases resolved} for every dump in `folder`."""
    if not folder or not Path(folder).is_dir():
        return {}
    out: dict[str, str] = {}
    for f in sorted(Path(folder).glob("*.mlir")):
        try:
            text = _resolve_aliases(f.read_text(errors="replace"))
        except OSError:
            continue
        out[_executable_name(text) or f.stem] = text
    return out


def _config_signature(text: str) -> list[str]:
    """The parts of a configured executable a spec can change: lowering configs and translation infos."""
    return _lowering_configs(text) + _balanced_after(text, "translation_info = ")


def _lowering_configs(text: str) -> list[str]:
    return _balanced_after(text, "lowering_config = ")


def _balanced_after(text: str, prefix: str) -> list[str]:
    """Every attribute value following `prefix`, up to its balanced closing '>' (whitespace-normalised)."""
    out = []
    i = text.find(prefix)
    while i >= 0:
        j = i + len(prefix)
        depth, k = 0, j
        while k < len(text):
            c = text[k]
            if c == "<":
                depth += 1
            elif c == ">" and text[k - 1] != "-":
                depth -= 1
                if depth == 0:
                    break
            elif depth == 0 and c in ",}":
                break
            k += 1
        out.append(" ".join(text[j:k + 1].split()))
        i = text.find(prefix, k)
    return out


def _resolve_aliases(text: str) -> str:
    """Inline top-level attribute aliases (`#config = #iree_cpu.lowering_config<...>`) so configurations printed
    with and without aliases compare equal."""
    aliases = dict(re.findall(r"^(#[A-Za-z_][\w$.-]*)\s*=\s*(.+?)\s*$", text, flags=re.M))
    if not aliases:
        return text
    body = re.sub(r"^#[A-Za-z_][\w$.-]*\s*=.*$\n?", "", text, flags=re.M)
    pattern = re.compile("|".join(re.escape(a) for a in sorted(aliases, key=len, reverse=True)) + r"(?![\w$.-])")
    for _ in range(8):  # aliases may refer to aliases
        new = pattern.sub(lambda m: aliases[m.group(0)], body)
        if new == body:
            break
        body = new
    return body


def _executable_name(text: str) -> str | None:
    m = re.search(r'hal\.executable\s+(?:public\s+|private\s+)?@("(?:[^"\\]|\\.)*"|[\w$.-]+)', text)
    return m.group(1).strip('"') if m else None


# ==== edited dispatches =======================================================================================

def substitutions_from_dir(folder: str | os.PathLike, kinds: Sequence[str] = KINDS
                           ) -> tuple[list[tuple[str, str, str]], str | None]:
    """The substitutions a dispatch folder asks for, and the kernel it was dumped from (None without a
    manifest). Each `*.mlir` is a source (`module_<exe>.mlir`, as IREE dumps them) or a configuration
    (`configured_module_<exe>.mlir`; or, for other names, any file carrying lowering_config/translation_info);
    the executable is read from the file's `hal.executable @name`. With a dump manifest only EDITED files are
    substituted (an unchanged configuration next to an edited source would discard the edit)."""
    d = Path(folder)
    if not d.is_dir():
        raise VariantError(f"dispatch folder {d}: no such directory")
    manifest = _read_manifest(d)
    originals: dict[str, str] = manifest.get("files", {}) if manifest else {}
    subs: list[tuple[str, str, str]] = []
    for f in sorted(d.glob("*.mlir")):
        try:
            data = f.read_bytes()
        except OSError as e:
            raise VariantError(f"dispatch file {f}: {e.strerror or e}") from None
        if originals.get(f.name, {}).get("sha256") == hashlib.sha256(data).hexdigest():
            continue  # unchanged since the dump
        text = data.decode(errors="replace")
        exe = _executable_name(text)
        if exe is None:
            raise VariantError(f"dispatch file {f}: holds no hal.executable (not written by --dump-dispatches?)")
        kind = _dispatch_kind(f.name, text)
        if kind in kinds:
            subs.append((kind, exe, str(f.resolve())))
    if not subs:
        what = "no file differs from the dump (edit one first)" if originals else "holds no dispatch .mlir files"
        raise VariantError(f"dispatch folder {d}: {what}")
    return subs, (manifest or {}).get("func_name")


def _dispatch_kind(filename: str, text: str) -> str:
    if filename.startswith("configured_"):
        return "configuration"
    if filename.startswith("module_"):
        return "source"
    return "configuration" if ("lowering_config" in text or "translation_info" in text) else "source"


def _read_manifest(d: Path) -> dict | None:
    f = d / DUMP_MANIFEST
    if not f.is_file():
        return None
    try:
        data = json.loads(f.read_text())
    except (OSError, ValueError) as e:
        raise VariantError(f"dump manifest {f}: unreadable ({_one_line(str(e))}); delete it to substitute "
                           "every .mlir file in the folder") from None
    return data if isinstance(data, dict) else None


def dump_dispatches(sig: "OpSignature", target: "Target | str", out_dir: str | os.PathLike,
                    variant: Variant = BASELINE, *, timeout_s: float = 600.0) -> list[Path]:
    """Compile `sig` for `target` with `variant` and write every dispatch's source (`module_<exe>.mlir`) and
    chosen configuration (`configured_module_<exe>.mlir`) into `out_dir/<func_name>/`, plus a manifest
    (`boo-dump.json`: kernel, target, flags, digests). Edit one file, then measure `--variant NAME=<that
    folder>/`: only edited files are substituted. Refuses to overwrite a folder holding edits. Returns the
    written .mlir files. Raises CompileError when the compile fails, VariantError for folder problems."""
    from .compile.export import export_mlir
    from .compile.pool import compile_flags, run_flags
    from .targets import parse_target

    tgt = parse_target(target) if isinstance(target, str) else target
    dest = Path(out_dir).expanduser().resolve() / sig.func_name
    _refuse_to_clobber_edits(dest)
    flags = compile_flags(sig, tgt, variant)
    mlir = export_mlir(sig)
    with tempfile.TemporaryDirectory(prefix="boo-dump-") as tmp:
        t = Path(tmp)
        (t / "in.mlir").write_text(mlir)
        cmd = [_tool("iree-compile"), str(t / "in.mlir"), "--iree-input-type=torch", *flags, *run_flags(flags),
               f"--iree-hal-dump-executable-sources-to={t / 'd'}",
               f"--iree-hal-dump-executable-configurations-to={t / 'd'}", "-o", str(t / "out.vmfb")]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise CompileError(f"{sig.func_name}: iree-compile timed out after {timeout_s:.0f} s", command=cmd) \
                from None
        if proc.returncode != 0:
            raise CompileError(f"{sig.func_name}: iree-compile failed: {_compiler_error(proc.stderr, '')}",
                               stderr=proc.stderr, command=cmd)
        files = sorted((t / "d").glob("*.mlir"))
        dest.mkdir(parents=True, exist_ok=True)
        for old in dest.glob("*.mlir"):
            old.unlink()
        written = []
        for f in files:
            shutil.copyfile(f, dest / f.name)
            written.append(dest / f.name)
    manifest = {
        "func_name": sig.func_name,
        "target": tgt.name,
        "variant": variant.describe(),
        "flags": flags,
        "files": {f.name: {"kind": _dispatch_kind(f.name, f.read_text(errors="replace")),
                           "executable": _executable_name(f.read_text(errors="replace")),
                           "sha256": hashlib.sha256(f.read_bytes()).hexdigest()} for f in written},
        "how": "edit ONE file per dispatch (its source module_*.mlir or its configuration configured_module_"
               "*.mlir), then measure with --variant NAME=<this folder>/ ; only edited files are substituted",
    }
    (dest / DUMP_MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return written


def _refuse_to_clobber_edits(dest: Path) -> None:
    if not dest.is_dir():
        return
    manifest = _read_manifest(dest) or {}
    originals = manifest.get("files", {})
    for f in sorted(dest.glob("*.mlir")):
        digest = hashlib.sha256(f.read_bytes()).hexdigest()
        if originals.get(f.name, {}).get("sha256") != digest:
            raise VariantError(f"dump folder {dest}: {f.name} was edited (or is not from a dump); "
                               "dump into another folder or move it away first")
