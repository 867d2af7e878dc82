#!/usr/bin/env python3
"""The code's shape against the limits the vocabulary issue set: modules over 400 lines, classes over 250, functions
over 60 lines, functions over complexity 12 (ruff's C901 count), import cycles (grimp) and uses of `Any`.

    python3 scripts/code_shape.py [--list]
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("boo_engine", "boo_tui")
LIMITS = {"module_lines": 400, "class_lines": 250, "function_lines": 60, "complexity": 12}


def _cycles() -> list[list[str]]:
    """The architecture test's cycle finder, on the graph with TYPE_CHECKING imports counted too (the issue's count;
    the test leaves them out)."""
    import grimp

    sys.path.insert(0, str(ROOT))   # this checkout's packages, whatever is installed
    sys.path.insert(0, str(ROOT / "tests"))
    from test_architecture import _cycles as strongly_connected

    graph = grimp.build_graph(*PACKAGES)
    return strongly_connected({m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules})


def _complex() -> list[str]:
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "C901", "--output-format", "json",
                          "--config", f"lint.mccabe.max-complexity = {LIMITS['complexity']}", *PACKAGES],
                         cwd=ROOT, capture_output=True, text=True).stdout
    return [f"{d['filename'].removeprefix(str(ROOT) + '/')}:{d['location']['row']} {d['message']}"
            for d in json.loads(out or "[]")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="name every module, class and function over its limit")
    opts = ap.parse_args()
    modules, classes, functions, anys = [], [], [], 0
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            text = path.read_text()
            rel = path.relative_to(ROOT)
            anys += len(re.findall(r"\bAny\b", "\n".join(ln for ln in text.splitlines() if "import" not in ln)))
            lines = len(text.splitlines())
            if lines > LIMITS["module_lines"]:
                modules.append(f"{rel} {lines}")
            for node in ast.walk(ast.parse(text)):
                size = (node.end_lineno or node.lineno) - node.lineno + 1 if hasattr(node, "lineno") else 0
                if isinstance(node, ast.ClassDef) and size > LIMITS["class_lines"]:
                    classes.append(f"{rel}:{node.lineno} {node.name} {size}")
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and size > LIMITS["function_lines"]:
                    functions.append(f"{rel}:{node.lineno} {node.name} {size}")
    complex_ = _complex()
    cycles = _cycles()
    print(f"modules over {LIMITS['module_lines']} lines: {len(modules)}; classes over {LIMITS['class_lines']}: "
          f"{len(classes)}; functions over {LIMITS['function_lines']} lines: {len(functions)}; over complexity "
          f"{LIMITS['complexity']}: {len(complex_)}; import cycles: {len(cycles)}; uses of Any: {anys}")
    if opts.list:
        for title, items in (("modules", modules), ("classes", classes), ("functions", functions),
                             ("complexity", complex_), ("cycles", [" ".join(c) for c in cycles])):
            print(f"\n{title}:")
            for item in items:
                print(f"  {item}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
