"""Reading dumped executables as text: which executable a file holds, whether it is a source or a configuration,
and the parts of a configuration a tuning spec can change. Plain string work (no MLIR parser): the dumps IREE
writes are regular enough, and this runs on every compiled kernel."""
from __future__ import annotations

import re


def executable_name(text: str) -> str | None:
    """The name of the `hal.executable @name` a dumped file holds (quotes removed), or None."""
    m = re.search(r'hal\.executable\s+(?:public\s+|private\s+)?@("(?:[^"\\]|\\.)*"|[\w$.-]+)', text)
    return m.group(1).strip('"') if m else None


def dispatch_kind(filename: str, text: str) -> str:
    """"configuration" or "source": from IREE's dump file names (`configured_module_*`, `module_*`), else from
    the content (a configuration carries lowering_config / translation_info)."""
    if filename.startswith("configured_"):
        return "configuration"
    if filename.startswith("module_"):
        return "source"
    return "configuration" if ("lowering_config" in text or "translation_info" in text) else "source"


def config_signature(text: str) -> list[str]:
    """The parts of a configured executable a spec can change: lowering configs and translation infos."""
    return lowering_configs(text) + balanced_after(text, "translation_info = ")


def lowering_configs(text: str) -> list[str]:
    return balanced_after(text, "lowering_config = ")


def balanced_after(text: str, prefix: str) -> list[str]:
    """Every attribute value following `prefix`, up to its balanced closing '>' (whitespace-normalised)."""
    out = []
    i = text.find(prefix)
    while i >= 0:
        j = i + len(prefix)
        delim = min((d for d in (text.find(",", j), text.find("}", j)) if d >= 0), default=len(text))
        lt = text.find("<", j)
        k = delim   # a plain value ends at (and keeps) its delimiter
        if 0 <= lt < delim:
            k = angle_end(text, lt + 1)
            k = len(text) if k < 0 else k
        out.append(" ".join(text[j:k + 1].split()))
        i = text.find(prefix, k)
    return out


def resolve_aliases(text: str) -> str:
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


def angle_end(text: str, start: int) -> int:
    """The index of the '>' that closes an attribute whose '<' is just before `start` ('->' in affine maps is
    not a bracket); -1 when it is not closed."""
    depth = 1
    for k in range(start, len(text)):
        c = text[k]
        if c == "<":
            depth += 1
        elif c == ">" and text[k - 1] != "-":
            depth -= 1
            if depth == 0:
                return k
    return -1
