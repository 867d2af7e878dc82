"""The engine is a library with three front ends: it never depends on the UI toolkit, its layers only import
downwards, nothing imports in a cycle, and no module or class grows past what a newcomer can read alone."""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("boo_engine", "boo_tui")
MAX_MODULE_LINES = 500
MAX_CLASS_LINES = 300


def _lint_imports(cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("lint-imports")
    cmd = [exe] if exe else [sys.executable, "-m", "importlinter.cli"]
    return subprocess.run(cmd + ["--config", str(cwd / "pyproject.toml"), "--no-cache"], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=600)


def test_import_contracts_are_kept():
    """pyproject.toml's contracts: the engine never imports textual/plotext/boo_tui, and its layers
    (front ends > session > stages > variants/commands > ops/targets > results/errors) only import downwards."""
    proc = _lint_imports(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "KEPT" in proc.stdout and "BROKEN" not in proc.stdout, proc.stdout


@pytest.mark.parametrize("module, violation", [
    ("boo_engine/results.py", "from boo_engine import session as _upward"),        # a record importing the session
    ("boo_engine/commands/driver_flags.py", "import boo_engine.compile.cache as _upward"),  # grammar importing a stage
    ("boo_engine/exporters.py", "import textual as _ui"),                           # the engine importing the UI
    ("boo_tui/palette.py", "import boo_engine.session as _direct"),                 # the UI past boo_engine.api
])
def test_import_contracts_fail_when_broken(tmp_path, module, violation):
    """The contracts are not vacuous: one upward import in a copy of the tree makes lint-imports fail."""
    for name in PACKAGES:
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / module
    target.write_text(target.read_text() + f"\n{violation}\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    proc = _lint_imports(tmp_path, env)
    assert proc.returncode != 0 and "BROKEN" in proc.stdout, proc.stdout + proc.stderr


def _import_graph() -> dict[str, set[str]]:
    import grimp

    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True)
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.append(m)
                    if m == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    """No module reaches itself through imports, lazy ones inside functions included (TYPE_CHECKING-only imports
    excluded): a cycle is two modules that can only be understood, and changed, together."""
    cycles = _cycles(_import_graph())
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def _sources() -> list[Path]:
    return sorted(p for name in PACKAGES for p in (ROOT / name).rglob("*.py"))


def test_no_module_or_class_too_big_to_read_alone():
    too_big = []
    for path in _sources():
        text = path.read_text()
        rel = path.relative_to(ROOT)
        n = len(text.splitlines())
        if n > MAX_MODULE_LINES:
            too_big.append(f"{rel}: {n} lines (> {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > MAX_CLASS_LINES:
                    too_big.append(f"{rel}: class {node.name}: {size} lines (> {MAX_CLASS_LINES})")
    assert not too_big, "\n".join(too_big)


def test_the_dashboard_contract_names_every_engine_module_but_the_api():
    """boo_tui's contract forbids each engine module by name: one added later must be named there too, or the
    dashboard could import it past boo_engine.api unseen."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    [contract] = [c for c in config["tool"]["importlinter"]["contracts"] if c.get("source_modules") == ["boo_tui"]]
    engine = ROOT / "boo_engine"
    modules = {f"boo_engine.{p.stem}" for p in engine.glob("*.py") if p.name != "__init__.py"}
    modules |= {f"boo_engine.{p.parent.name}" for p in engine.glob("*/__init__.py")}
    assert set(contract["forbidden_modules"]) == modules - {"boo_engine.api"}


def test_every_test_file_has_one_feature():
    """`pytest -m FEATURE` runs a feature's tests: a test file named in no feature (or in two) would be left out of
    (or run twice by) the subsets a developer runs after a change."""
    from conftest import FEATURES

    named = [stem for stems in FEATURES.values() for stem in stems]
    files = sorted(p.stem for p in (ROOT / "tests").glob("test_*.py"))
    assert sorted(named) == files, (set(files) - set(named), [s for s in named if named.count(s) > 1])
