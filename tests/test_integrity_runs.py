"""What a run writes and what it says are true: no write into a newer boo-tui's database or another program's
SQLite file, no resuming another machine's run here, the tuning spec the README promises, per-kernel variant
tables that name real kernels, and one-line errors (never a traceback) for files and outputs that are not what
they should be. Every case runs the real front end in a subprocess against real files."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import refused, run

ROOT = Path(__file__).resolve().parents[1]

CMD = "gemm -m 8 -n 8 -k 8"


def runs_in(db):
    with sqlite3.connect(db) as c:
        n = c.execute("SELECT count(*) FROM runs").fetchone()[0]
    c.close()
    return n


def measured_db(cli_env, tmp_path, name="r.db"):
    db = tmp_path / name
    p = run([CMD, "--db", db, "--headless", "--rounds", "1", "--max-time", "0.05"], cli_env, tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    return db


def test_a_database_of_a_newer_schema_is_never_written(cli_env, tmp_path):
    """An older boo-tui (one migration behind) stored a run in a newer database with exit 0, while compare and
    merge refused the same file."""
    db = measured_db(cli_env, tmp_path)
    with sqlite3.connect(db) as c:
        c.execute("INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
                  "VALUES ('boo_results', 'm999_from_the_future', '2030-01-01')")
    c.close()
    before = runs_in(db)
    p = run([CMD, "--db", db, "--headless"], cli_env, tmp_path)
    refused(p, str(db), "newer boo-tui")
    assert runs_in(db) == before


def test_a_sqlite_file_of_another_program_is_never_written(cli_env, tmp_path):
    db = tmp_path / "notes.sqlite"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE notes (x)")
    c.close()
    before = db.read_bytes()
    p = run([CMD, "--db", db, "--headless"], cli_env, tmp_path)
    refused(p, str(db), "not a boo-tui results database")
    assert db.read_bytes() == before


def test_another_machines_run_is_not_resumed_here(cli_env, tmp_path):
    """A database copied from a laptop and resumed here measured here and filed the results under the laptop."""
    db = measured_db(cli_env, tmp_path)
    with sqlite3.connect(db) as c:
        for eid, details in c.execute("SELECT id, details FROM environments").fetchall():
            env = json.loads(details)
            env.update(host="laptop", cpu="Apple M3", cpu_name="apple-m3", cpu_features=[])
            c.execute("UPDATE environments SET details = ? WHERE id = ?", (json.dumps(env), eid))
        c.execute("UPDATE runs SET status = 'interrupted'")
    c.close()
    p = run(["--resume", "last", "--db", db, "--headless"], cli_env, tmp_path)
    refused(p, "--resume", "another machine", "laptop")
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT status FROM runs").fetchall() == [("interrupted",)]
    c.close()


def test_the_tuning_spec_path_variable_is_a_variant(cli_env, tmp_path):
    """README: BOO_TUNING_SPEC_PATH is honoured as a variant named after its file. boo-tui ignored it: a valid
    spec, a directory and garbage all ran with exit 0 and no variant."""
    spec = ROOT / "tuning_specs" / "cpu_matches_nothing.mlir"
    env = dict(cli_env, BOO_TUNING_SPEC_PATH=str(spec))
    db = tmp_path / "r.db"
    p = run([CMD, "--db", db, "--headless", "--no-best", "--rounds", "1", "--max-time", "0.05"], env, tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "measured as variant 'cpu_matches_nothing'" in p.stderr
    assert "cpu_matches_nothing" in p.stdout                     # its column, reported as matching nothing
    with sqlite3.connect(db) as c:
        names = {r[0] for r in c.execute("SELECT DISTINCT v.name FROM results r JOIN variants v ON v.id = r.variant_id")}
    c.close()
    assert names == {"baseline", "cpu_matches_nothing"}
    garbage = tmp_path / "garbage.mlir"
    garbage.write_bytes(bytes(range(256)) * 4)    # binary: iree-opt echoes it back, not UTF-8
    for value, words in ((tmp_path, ("is a directory",)), (garbage, ("variant garbage", "tuning spec"))):
        p = run([CMD, "--db", tmp_path / "x.db", "--headless"], dict(cli_env, BOO_TUNING_SPEC_PATH=str(value)),
                tmp_path)
        refused(p, *words)


def test_a_per_kernel_table_for_no_kernel_of_the_run_is_refused(cli_env, tmp_path):
    """`[a.kernels.NAME]` with a typo in NAME made `a` the baseline again, silently; per-kernel flags were not
    checked before compiling."""
    typo = tmp_path / "typo.toml"
    typo.write_text('[a.kernels.gemm_float32_forward_8x8x9]\nflags = ["--iree-llvmcpu-enable-ukernels=none"]\n')
    p = run([CMD, "--db", tmp_path / "r.db", "--variants-file", typo, "--headless"], cli_env, tmp_path)
    line = refused(p, "variant a", "kernels.gemm_float32_forward_8x8x9 is not a kernel of this run")
    assert "did you mean gemm_float32_forward_8x8x8" in line
    bad_flag = tmp_path / "flag.toml"
    bad_flag.write_text('[a.kernels.gemm_float32_forward_8x8x8]\nflags = ["--iree-llvmcpu-no-such-flag=1"]\n')
    p = run([CMD, "--db", tmp_path / "r.db", "--variants-file", bad_flag, "--headless"], cli_env, tmp_path)
    refused(p, "variant a", "--iree-llvmcpu-no-such-flag")
    assert not (tmp_path / "r.db").exists() or runs_in(tmp_path / "r.db") == 0


def test_a_byte_order_mark_on_line_one_is_accepted(cli_env, tmp_path):
    cmds = tmp_path / "cmds.txt"
    cmds.write_bytes(b"\xef\xbb\xbf" + CMD.encode() + b"\n")
    p = run([cmds, "--db", tmp_path / "r.db", "--headless", "--rounds", "1", "--max-time", "0.05"], cli_env,
            tmp_path)
    assert p.returncode == 0 and "1 failed" not in p.stdout, (p.stdout[-800:], p.stderr[-800:])


def test_a_full_standard_output_is_one_line_and_the_run_is_kept(cli_env, tmp_path):
    """`boo-tui CMD --headless > /dev/full` measured, stored, then ended in `internal error: OSError`."""
    db = tmp_path / "r.db"
    with open("/dev/full", "w") as full:
        p = run([CMD, "--db", db, "--headless", "--rounds", "1", "--max-time", "0.05"], cli_env, tmp_path,
                stdout=full, capture_output=False, stderr=subprocess.PIPE)
        assert p.returncode == 1, p.stderr[-2000:]
        assert "cannot write to standard output (No space left on device)" in p.stderr
        assert "internal error" not in p.stderr and "Traceback" not in p.stderr and "Exception" not in p.stderr
        assert runs_in(db) == 1
        p = run(["compare", db, db], cli_env, tmp_path, stdout=full, capture_output=False, stderr=subprocess.PIPE)
    refused_line = [line for line in p.stderr.splitlines() if line.strip()]
    assert p.returncode == 1 and len(refused_line) == 1 and "standard output" in refused_line[0], p.stderr


def test_a_model_that_ends_the_process_under_capture_is_said(cli_env, tmp_path):
    """A model calling os._exit(0) in forward() ended `capture` with exit 0, nothing written and not a word."""
    (tmp_path / "m.py").write_text("import os\nimport torch\n\n\nclass M(torch.nn.Module):\n"
                                   "    def forward(self, x):\n        os._exit(0)\n\n\ndef make():\n    return M()\n")
    p = run(["capture", tmp_path / "m.py:make", "--input", "2x3", "-o", tmp_path / "out.txt"], cli_env, tmp_path)
    refused(p, "called os._exit(0)")
    assert not (tmp_path / "out.txt").exists()


def test_every_front_end_names_the_defaults_it_uses(cli_env, tmp_path):
    """`tune --help` named a default database (~/.local/...) it did not use, and no default kernel cache."""
    from boo_engine import locations

    assert locations.db_path(environ={}) == Path.cwd() / "boo-results.db"
    assert locations.cache_root(environ={}) == Path.home() / ".cache/boo-tui/kernels"
    for sub in ([], ["tune"], ["model"], ["peak"]):
        p = run([*sub, "--help"], dict(cli_env, COLUMNS="200"), tmp_path)
        assert p.returncode == 0, p.stderr
        assert "(default $BOO_DB or ./boo-results.db)" in p.stdout, (sub, p.stdout)
        if sub in ([], ["tune"]):
            assert "(default $BOO_CACHE_DIR or ~/.cache/boo-tui/kernels)" in p.stdout, (sub, p.stdout)


def test_a_bad_line_adds_no_column_group(cli_env, tmp_path):
    """An unparsable line added a phantom `-/-` column group to the Markdown table (its error sat there)."""
    cmds = tmp_path / "cmds.txt"
    cmds.write_text(f"{CMD}\nnot a command at all\n")
    p = run([cmds, "--db", tmp_path / "r.db", "--headless", "--no-best", "--rounds", "1", "--max-time", "0.05"],
            cli_env, tmp_path)
    header = next(line for line in p.stdout.splitlines() if line.startswith("| command"))
    assert "-/-" not in header and header.count("(us)") == 2, header   # baseline and torch
    bad = next(line for line in p.stdout.splitlines() if "not a command at all" in line)
    at = [cell.strip() for cell in header.split("|")].index("baseline (us)")
    assert bad.split("|")[at].strip().startswith("**failed**: "), bad   # in the baseline's column


def test_a_halted_run_says_not_measured_only_of_jobs_without_samples(tmp_path):
    """The Ray head died while a job measured: its 1.25 M samples were stored and it read "not measured". The
    halt here is the one a lost cluster makes (`SessionState.halt`, as compiling.cluster_lost calls it), taken
    while a real kernel is measuring; the job's samples are kept and its error says so."""
    import time

    from boo_engine.config import SessionConfig
    from boo_engine.results import IREE
    from boo_engine.session import Session

    cfg = SessionConfig(target="cpu", backends=(IREE,), db_path=str(tmp_path / "r.db"),
                        cache_dir=str(tmp_path / "kernels"), min_time_s=60.0, max_time_s=120.0, rounds=1)
    with Session(cfg) as s:
        s.add_inputs(["gemm -m 32 -n 32 -k 32", "gemm -m 16 -n 16 -k 16"])
        s.start()
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not any(r.samples_us for r in s.jobs.values()):
            time.sleep(0.05)
        assert any(r.samples_us for r in s.jobs.values())
        s._state.halt("the Ray cluster went away: the run stopped", "the Ray cluster went away", store_broken=False)
        assert s.wait(timeout=120)
    with sqlite3.connect(tmp_path / "r.db") as c:
        rows = c.execute("SELECT r.status, r.error, (SELECT count(*) FROM samples WHERE result_id = r.id) "
                         "FROM results r").fetchall()
    c.close()
    assert {status for status, _, _ in rows} == {"interrupted"}, rows
    with_samples = [(e, n) for _, e, n in rows if n]
    assert with_samples and all("samples kept" in e and "not measured" not in e for e, _ in with_samples), rows
    assert all(e.startswith("not measured: ") for _, e, n in rows if not n), rows


def test_the_dashboards_worker_log_is_private_and_tidied(tmp_path, monkeypatch):
    """The dashboard's worker log was a predictable /tmp/boo-tui-<pid>-workers.log, opened through a link a
    planted one pointed anywhere, and never deleted."""
    import os
    import stat
    import tempfile

    from boo_tui.process import close_child_output, route_child_output

    monkeypatch.delenv("BOO_CHILD_LOG", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    victim = tmp_path / "victim"
    victim.write_text("kept\n")
    (tmp_path / f"boo-tui-{os.getpid()}-workers.log").symlink_to(victim)   # the old name, planted
    path = route_child_output()
    assert os.environ["BOO_CHILD_LOG"] == path
    folder = os.path.dirname(path)
    st = os.lstat(folder)
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.getuid() and not os.path.islink(path)
    subprocess.run([sys.executable, "-c", "from boo_engine.process_setup import redirect_output_if_asked as r; r(); "
                    "print('from a worker')"], check=True, timeout=60)
    assert victim.read_text() == "kept\n" and "from a worker" in open(path).read()
    assert close_child_output() == path and os.path.exists(path)   # something in it: kept, and said
    monkeypatch.delenv("BOO_CHILD_LOG")
    empty = route_child_output()
    assert empty != path
    assert close_child_output() is None and not os.path.exists(os.path.dirname(empty))


def test_linked_specs_never_go_to_a_shared_temp_folder(tmp_path, monkeypatch):
    """When the spec cache could not be written, two specs were linked into /tmp/boo-tui-linked-specs, a folder
    anyone could make first and then swap the linked spec in before the compile read it."""
    import os
    import stat
    import tempfile

    from boo_engine.variants import linking

    specs = ROOT / "tuning_specs"
    monkeypatch.setenv("BOO_SPEC_CACHE_DIR", "/dev/null/linked")        # cannot be made, even by root
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    if hasattr(linking, "_private_folder"):
        linking._private_folder.cache_clear()
    shared = tmp_path / "boo-tui-linked-specs"
    shared.mkdir()                                                      # made first by someone else
    out = Path(linking.merged_spec_path([str(specs / "cpu_gemm_256x512x512_fast.mlir"),
                                         str(specs / "cpu_matches_nothing.mlir")]))
    assert out.parent != shared and not any(shared.iterdir())
    st = os.lstat(out.parent)
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.getuid()
    assert "tuning_spec_entrypoint" in out.read_text()


def test_merging_a_damaged_database_names_it_in_one_line(cli_env, tmp_path):
    db = measured_db(cli_env, tmp_path)
    data = bytearray(db.read_bytes())
    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(bytes(data[:len(data) // 2]))            # a copy cut short
    p = run(["merge", db, damaged, "-o", tmp_path / "all.db"], cli_env, tmp_path)
    refused(p, "damaged.db")
    assert not (tmp_path / "all.db").exists()


@pytest.mark.parametrize("name", ["../../outside.txt", "/tmp/outside.txt", "configs/../../x", "a\\..\\x"])
def test_a_node_cannot_write_outside_the_cache_entry_it_ships(tmp_path, name):
    """A Ray node sends its compiled entry's files by name; '../x' was written wherever it pointed."""
    from types import SimpleNamespace

    from boo_engine.cluster.compiling import RayCompilePool
    from boo_engine.cluster.remote import Shipped
    from boo_engine.compile.cache import KernelCache
    from boo_engine.errors import CompileError

    cache = KernelCache(tmp_path / "kernels")
    shipped = Shipped(meta={}, node_root="/node/cache", mlir_name="k.mlir", mlir_text=None, seconds=0.1,
                      cache_hit=False, node="node-b", files={"kernel.vmfb": b"x", name: b"planted"})
    with pytest.raises(CompileError, match="outside the cache entry"):
        RayCompilePool._write_entry(SimpleNamespace(cache=cache), shipped, "gemm_float32_forward_8x8x8", "0" * 64)
    assert not any(p.name == "outside.txt" for p in tmp_path.rglob("*")) and not Path("/tmp/outside.txt").exists()


def test_a_home_that_cannot_take_the_cache_key_still_runs_and_says_so(cli_env, tmp_path):
    """The user's own cache key is made on first use under ~/.config; where that cannot be written (a read-only
    home), every compile stopped with exit 2. The run signs with a key of its own instead, and says so once."""
    env = dict(cli_env, XDG_CONFIG_HOME="/dev/null/config", BOO_CACHE_DIR=str(tmp_path / "kernels"))
    env.pop("BOO_CACHE_KEY", None)
    p = run([CMD, "--db", tmp_path / "r.db", "--headless", "--rounds", "1", "--max-time", "0.05"], env, tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    said = [line for line in p.stderr.splitlines() if "cannot be made" in line]
    assert len(said) == 1 and "a key of its own" in said[0], p.stderr
