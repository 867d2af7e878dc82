"""Fixtures shared by the test modules that compile whole tables of kernels."""
from __future__ import annotations

import os

import pytest

from boo_engine.commands import parse_command
from boo_engine.compile.cache import KernelCache
from boo_engine.compile.pool import CompilePool
from boo_engine.locations import DEFAULTS_TABLE_ENV

# The tests compile with the built-in per-op rules, never with a table `boo-tui tune --defaults` stored on this
# machine (it would change which flags a kernel gets); a test that needs a table points this at its own file.
os.environ[DEFAULTS_TABLE_ENV] = "off"


def pytest_sessionfinish(session, exitstatus):
    """IREE's runtime bindings (nanobind) list every binding object still alive when the interpreter exits,
    ~250 lines that buried the test summary in CI's log. They are IREE's module-level objects, not leaks of a
    test; switch the report off once the tests are done."""
    try:
        from iree.runtime import _binding
    except ImportError:
        return
    disable = getattr(_binding, "disable_leak_checker", None)
    if disable is not None:
        disable()


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> KernelCache:
    """A kernel cache private to the test module (it shadows pytest's own `cache` fixture, unused here)."""
    return KernelCache(tmp_path_factory.mktemp("kernels"))


@pytest.fixture(scope="module")
def compiled(request, cache):
    """Every kernel of the module's COMMANDS compiled once, in parallel through the pool (which makes this the
    pool's end-to-end test as well): {func_name: Artifact}."""
    sigs = [parse_command(c) for c in request.module.COMMANDS]
    with CompilePool(cache=cache) as pool:
        futures = {s.func_name: pool.submit(s, "cpu") for s in sigs}
        return {name: f.result() for name, f in futures.items()}


@pytest.fixture(scope="session")
def cli_env(tmp_path_factory):
    """The environment of a front end run as a subprocess: one kernel cache for the whole test session (each
    kernel compiles once across the modules that run the CLIs), and no BOO_DB from the caller."""
    e = dict(os.environ)
    e["BOO_CACHE_DIR"] = str(tmp_path_factory.mktemp("cli-cache"))
    e.pop("BOO_DB", None)
    return e
