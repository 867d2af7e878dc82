"""Several tuning specs in one variant. IREE takes ONE `--iree-codegen-tuning-spec-path`, so the specs are linked into
one with IREE's own `iree-codegen-link-tuning-specs` pass, in the order given (the first matching spec wins for an
op). The linked file is content-addressed and kept in a stable folder: a kernel cache entry's compile_command.sh
refers to it."""
from __future__ import annotations

import functools
import hashlib
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from .. import iree_tools, locations
from ..errors import VariantError
from ..fsutil import atomic_write
from .common import file_bytes
from .specs import compiler_error, iree_opt, preflight_spec


def spec_cache_dir() -> Path:
    """Where linked specs live ($BOO_SPEC_CACHE_DIR, else ~/.cache/boo-tui/linked-specs): a stable place,
    because the kernel cache's compile_command.sh refers to the linked file."""
    return locations.linked_spec_dir()


@functools.cache
def _private_folder() -> Path:
    """This process's own folder (0700, an unpredictable name) for linked specs when the spec cache cannot be
    written. It was a shared /tmp/boo-tui-linked-specs, where a file planted under the content-addressed name a
    link would get was taken as the link's output and compiled in."""
    return Path(tempfile.mkdtemp(prefix="boo-tui-linked-specs-"))


def merged_spec_path(specs: Sequence[str]) -> str:
    """One spec file equivalent to `specs` (nested as modules and linked by IREE's
    `iree-codegen-link-tuning-specs` pass into a single @__kernel_config whose foreach_match tries the specs'
    matchers in the order given). Content-addressed, so it is made once per combination."""
    blobs = [file_bytes(s) for s in specs]
    digest = hashlib.sha256(b"\0".join(hashlib.sha256(b).digest() for b in blobs)).hexdigest()[:24]
    out = spec_cache_dir() / f"linked-{digest}.mlir"
    if out.is_file():
        return str(out)
    for s in specs:
        preflight_spec(s)
    parts = []
    for i, s in enumerate(specs):
        proc = iree_tools.run_tool([iree_opt(), "--mlir-print-local-scope", s], error=VariantError)
        body = proc.stdout.strip()
        body, n = re.subn(r"^module(\s+@[\w$.\"-]+)?", f"module @boo_spec_{i}", body, count=1)
        if n != 1:
            raise VariantError(f"tuning spec {s}: the file's top-level operation is not a module")
        parts.append(body)
    nested = "module attributes {transform.with_named_sequence} {\n" + "\n".join(parts) + "\n}\n"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError:  # read-only home (CI): a private temp folder still works for this process's compiles
        out = _private_folder() / out.name
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        src = Path(tmp) / "nested.mlir"
        src.write_text(nested)
        proc = iree_tools.run_tool([iree_opt(), "--iree-codegen-link-tuning-specs", str(src)], error=VariantError)
    if proc.returncode != 0 or "iree_codegen.tuning_spec_entrypoint" not in proc.stdout:
        why = compiler_error(proc.stderr) if proc.returncode else "no entry point after linking"
        raise VariantError(f"tuning specs {', '.join(specs)}: cannot link them into one: {why}")
    header = "// linked by boo-tui from, in order (first match wins):\n" + "".join(f"//   {s}\n" for s in specs)
    atomic_write(out, header + proc.stdout)  # several processes may link the same specs at once
    return str(out)
