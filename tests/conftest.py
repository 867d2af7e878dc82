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


#: each test file's feature (a marker: `pytest -m tune` runs the tuner's tests); pyproject.toml lists the markers
FEATURES: dict[str, tuple[str, ...]] = {
    "commands": ("test_commands", "test_commands_fuzz", "test_commands_long_lines", "test_aten", "test_ops",
                 "test_driver_samples", "test_targets"),
    "compile": ("test_aten_lowering", "test_aligned_tiles", "test_best_column", "test_boo_build", "test_cache",
                "test_cache_disk_full", "test_cache_faults", "test_cache_trust", "test_compile_ops", "test_compile_prebuilt",
                "test_compile_preload", "test_compile_robustness", "test_cpu_defaults", "test_decompositions",
                "test_formulations", "test_ops_compile", "test_specs", "test_variants", "test_variants_dispatches"),
    "measure": ("test_cache_mode", "test_compare", "test_devices", "test_harness", "test_harness_outputs",
                "test_ireeprof", "test_launch", "test_numerics", "test_roofline", "test_sizes_and_devices",
                "test_stats", "test_verdicts", "test_worker", "test_worker_reproducer"),
    "session": ("test_session", "test_session_plan", "test_spool", "test_reader", "test_stop_signals", "test_quiet_exit",
                "test_child_output"),
    "store": ("test_store", "test_store_disk_full", "test_bulk_rows", "test_many_rows", "test_row_memory",
              "test_history", "test_integrity", "test_integrity_runs"),
    "cli": ("test_cli_headless", "test_cli_help", "test_cli_targets", "test_cli_variants", "test_exporters",
            "test_exporters_environment", "test_export_sizes"),
    "model": ("test_capture", "test_capture_shares", "test_weights", "test_zoo", "test_model_cli",
              "test_model_numerics", "test_nn_backend", "test_nn_functional", "test_nn_kernels", "test_nn_modules"),
    "tune": ("test_tune", "test_tune_gpu_space", "test_tune_outputs", "test_tune_space", "test_tune_top",
             "test_tune_verdicts"),
    "tui": ("test_tui", "test_tui_history", "test_tui_layout", "test_tui_load", "test_tui_snapshots",
            "test_tui_table", "test_tui_tune", "test_tui_weights"),
    "ray": ("test_ray",),
    "gpu": ("test_gpu", "test_gpu_timing"),
    "architecture": ("test_architecture",),
}
FEATURE_OF = {stem: feature for feature, stems in FEATURES.items() for stem in stems}
#: tests that took over 1.2 s each in a whole-suite run here (tests/slow_tests.txt, written by
#: scripts/slow_tests.py from that run's JUnit XML): `pytest -m "not slow"` is the fast subset (README)
SLOW_LIST = os.path.join(os.path.dirname(__file__), "slow_tests.txt")


def _slow_ids() -> frozenset[str]:
    try:
        with open(SLOW_LIST, encoding="utf-8") as f:
            return frozenset(ln.strip() for ln in f if ln.strip() and not ln.startswith("#"))
    except FileNotFoundError:
        return frozenset()


def pytest_collection_modifyitems(config, items):
    """Every test gets its file's feature marker, and `slow` when tests/slow_tests.txt names it (by its id
    without parameters: every parameter of a slow test is slow)."""
    slow = _slow_ids()
    for item in items:
        stem = item.path.stem
        feature = FEATURE_OF.get(stem)
        if feature is not None:
            item.add_marker(feature)
        if item.nodeid.split("[", 1)[0] in slow:
            item.add_marker("slow")


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
