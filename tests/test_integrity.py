"""Nothing the user keeps is overwritten by an export: the results database (and the files SQLite keeps beside
it), a commands file or a variants file given to the same run, another export of the same run. Each front end
refuses in one line, exit 2, before anything runs, and the file is left as it was."""
from __future__ import annotations

import pytest
from cli_support import refused, run

CMD = "gemm -m 8 -n 8 -k 8"


KEPT = b"-- stands in for what the user keeps --\n"


def sqlite_db(path):
    """A real SQLite file (with a table of its own): a run would open, migrate and use it, then export over it."""
    import sqlite3

    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE kept (x)")
        c.execute("INSERT INTO kept VALUES (5)")
    c.close()
    return path.read_bytes()


@pytest.mark.parametrize("how", ["same path", "symlink to it", "hard link to its WAL"])
def test_an_export_onto_the_database_or_its_companions_is_refused(cli_env, tmp_path, how):
    """`boo-tui CMD --db same.csv --export same.csv` exited 0 and left 3 lines of CSV where 5 runs had been."""
    db = tmp_path / "same.csv"
    before = sqlite_db(db)
    kept = db
    target = db
    if how == "symlink to it":
        target = tmp_path / "out.csv"
        target.symlink_to(db)
    elif how == "hard link to its WAL":
        kept = tmp_path / "same.csv-wal"
        kept.write_bytes(KEPT)
        target = tmp_path / "out.json"
        target.hardlink_to(kept)
    p = run([CMD, "--db", db, "--export", target, "--headless"], cli_env, tmp_path)
    refused(p, "export", "results database")
    assert db.read_bytes() == before and (kept == db or kept.read_bytes() == KEPT)


def test_an_export_onto_its_own_commands_file_or_variants_file_is_refused(cli_env, tmp_path):
    cmds = tmp_path / "cmds.md"
    cmds.write_text(CMD + "\n")
    p = run([cmds, "--db", tmp_path / "r.db", "--export", cmds], cli_env, tmp_path)
    refused(p, "export", "input")
    assert cmds.read_text() == CMD + "\n"
    variants = tmp_path / "v.json"   # any name: the file is what is read
    variants.write_text("[v]\nflags = []\n")
    p = run([CMD, "--db", tmp_path / "r.db", "--variants-file", variants, "--export", variants], cli_env, tmp_path)
    assert p.returncode == 2 and variants.read_text() == "[v]\nflags = []\n", p.stderr
    assert not (tmp_path / "r.db").exists()          # refused before anything ran


def test_the_same_export_twice_is_refused(cli_env, tmp_path):
    p = run([CMD, "--db", tmp_path / "r.db", "--export", tmp_path / "a.md", "--export", tmp_path / "." / "a.md"],
            cli_env, tmp_path)
    refused(p, "given twice")


def test_compare_never_exports_onto_a_side(cli_env, tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_bytes(KEPT)
    b.write_bytes(KEPT)
    p = run(["compare", f"{a}:1", b, "--export", b], cli_env, tmp_path)
    refused(p, "results database")
    assert a.read_bytes() == KEPT and b.read_bytes() == KEPT


def test_boo_driver_never_writes_its_csv_onto_the_database(cli_env, tmp_path):
    db = tmp_path / "r.csv"
    before = sqlite_db(db)
    p = run(["conv", "-n", "1", "-c", "4", "-H", "8", "-W", "8", "-k", "4", "-y", "3", "-x", "3", "--db", db,
             "--csv", db], cli_env, tmp_path, prog="boo_engine.cli.driver")
    assert p.returncode == 2 and "results database" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert db.read_bytes() == before


# ---- a kernel cache someone else may have touched: regular files of ours, or nothing --------------------------

def _cached_run(env, tmp_path, cache, db="r.db"):
    e = dict(env, BOO_CACHE_DIR=str(cache))
    return run([CMD, "--headless", "--no-best", "--iter", "5", "--db", tmp_path / db, "--export", tmp_path / f"{db}.json"], e,
               tmp_path, timeout=240)


def _entry(cache):
    (meta,) = [m for m in cache.rglob("meta.json") if m.parent.parent.name.startswith("gemm_")]
    return meta.parent


@pytest.fixture
def cache_with_entry(cli_env, tmp_path):
    cache = tmp_path / "cache"
    p = _cached_run(cli_env, tmp_path, cache, "first.db")
    assert p.returncode == 0, p.stderr
    return cache


@pytest.mark.parametrize("where", [".compiler-version.json", "meta.json", "kernel.vmfb"])
def test_a_fifo_in_the_cache_is_never_opened(cli_env, tmp_path, cache_with_entry, where):
    """`.compiler-version.json` made a FIFO hung every run (no output, SIGTERM ignored, 725 s). Now a run goes
    on: the memo is recomputed, the entry rebuilt."""
    import os

    target = cache_with_entry / where if where.startswith(".") else _entry(cache_with_entry) / where
    assert target.exists()
    target.unlink()
    os.mkfifo(target)
    p = _cached_run(cli_env, tmp_path, cache_with_entry)   # times out (the test fails) if anything opens the FIFO
    assert p.returncode == 0, p.stderr


def test_links_in_the_cache_are_never_written_through(cli_env, tmp_path, cache_with_entry):
    """An `inputs_seed0` symlink in an entry made a run overwrite arg0.npy in the folder it pointed to; a
    `.<key>.lock` symlink made a run create its target."""
    import shutil

    entry = _entry(cache_with_entry)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "arg0.npy").write_bytes(b"mine")
    inputs = list(entry.glob("inputs_*"))
    assert inputs, list(entry.iterdir())
    for folder in inputs:
        shutil.rmtree(folder)
        folder.symlink_to(elsewhere, target_is_directory=True)
    p = _cached_run(cli_env, tmp_path, cache_with_entry)      # the kernel is cached: its inputs are written again
    assert p.returncode == 0, p.stderr
    assert (elsewhere / "arg0.npy").read_bytes() == b"mine" and sorted(elsewhere.iterdir()) == [elsewhere / "arg0.npy"]
    assert all(folder.is_dir() and not folder.is_symlink() for folder in inputs)

    lock = entry.parent / f".{entry.name}.lock"
    if lock.exists():
        lock.unlink()
    lock.symlink_to(tmp_path / "created-by-the-lock")
    shutil.rmtree(entry)                      # the kernel is built again, under its lock
    p = _cached_run(cli_env, tmp_path, cache_with_entry, "third.db")
    assert p.returncode == 0, p.stderr
    assert not (tmp_path / "created-by-the-lock").exists()


# ---- numbers out of range: one line, exit 2, nothing run ------------------------------------------------------

@pytest.mark.parametrize("option, value, words", [
    ("--rounds", "0", "at least 1"), ("--jobs", "0", "at least 1"), ("--min-effect", "-5", "[0, 100)"),
    ("--max-time", "0", "> 0"), ("--fail-on-regression", "-3", ">= 0"), ("--threads", "100000", "at most"),
    ("--seed", "-1", ">= 0"), ("--min-time", "-1", ">= 0"), ("--compile-timeout", "0", "> 0"),
])
def test_a_number_out_of_range_is_refused_before_anything_runs(cli_env, tmp_path, option, value, words):
    """Each of these ran and stored a run (`--threads 100000` ended in "RuntimeError: can't start new thread")."""
    db = tmp_path / "r.db"
    p = run([CMD, "--headless", "--db", db, f"{option}={value}"], cli_env, tmp_path)
    refused(p, option, words)
    assert not db.exists()
