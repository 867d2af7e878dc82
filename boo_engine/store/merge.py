"""`boo-tui merge`: several results databases (other machines, other days) into one, nothing lost or duplicated.

What is copied: runs with their environment, commands, variants, kernels, results and every raw sample; tunes
(with their kernels, candidates and the runs they measured in) and measured peaks. Ids are remapped; rows that
are identified by content are shared (an environment by its hash, a command by its text, a variant by its
content hash).

Idempotent: a run is identified by (started_at, command_line, its environment's hash) (the environment names the
host), a tune by (started_at, command_line, environment), a peak by (machine_key, target, measured_at, kind,
dtype); one already in the output is skipped, so merging the same database twice adds nothing. A run merged
once is not updated by a later merge (a run resumed after it was merged keeps its merged state). A run still
being measured by a live process of this host is skipped, said in a note (merge again once it finished).

Safety: every input is checked first (ours, not newer; an older one is read from a migrated private copy, never
written). The output is built in a temporary file beside it and renamed over it at the end, after
`PRAGMA integrity_check`: nothing half-written is ever at the output's path. An existing output is refused unless
`force`, which merges INTO it (its runs kept, the inputs' added: with idempotence that is how history
accumulates); the output must not be in use by a run meanwhile.
"""
from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sqlite_utils import Database

from . import schema
from .connection import StoreError
from .owner import effective_status, owner_alive, owner_of
from .readonly import check_schema, copy_database, current_copy
from .rows import Row


class MergeError(StoreError):
    """A merge that cannot be done (existing output without --force, no inputs): one line, a usage error."""


@dataclass
class MergeSummary:
    output: Path
    inputs: int = 0
    runs_added: int = 0
    runs_skipped: int = 0             # already in the output (or given twice)
    results_added: int = 0
    samples_added: int = 0
    tunes_added: int = 0
    peaks_added: int = 0
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"{self.output}: {self.runs_added} run(s) added ({self.results_added} results, "
                f"{self.samples_added} samples), {self.runs_skipped} already there; {self.tunes_added} tune(s), "
                f"{self.peaks_added} peak(s) added; from {self.inputs} database(s)")


def merge_databases(inputs: Sequence[str | Path], output: str | Path, *, force: bool = False) -> MergeSummary:
    """Merge `inputs` into `output` (see the module docstring). MergeError / SchemaError (one line) before
    anything is written when an input is not a results database we can read or the output exists without
    `force`."""
    out = Path(output)
    paths = [Path(p) for p in inputs]
    if not paths:
        raise MergeError("nothing to merge: give at least one database")
    for p in paths:
        check_schema(p)   # every input checked before anything is written
    if out.exists() and not force:
        raise MergeError(f"{out} exists: --force merges into it (its runs are kept)")
    if out.is_dir():
        raise MergeError(f"{out} is a directory")
    if not out.parent.is_dir():
        raise MergeError(f"{out}: directory {out.parent} does not exist")
    tmp = out.parent / f".{out.name}.merge-{os.getpid()}.tmp"
    summary = MergeSummary(out, inputs=len(paths))
    try:
        _prepare(out, tmp)
        conn = sqlite3.connect(str(tmp), uri=True, isolation_level=None)
        conn.row_factory = sqlite3.Row
        try:
            conn.execute("PRAGMA foreign_keys=ON")
            for p in paths:   # one transaction per input (SQLite attaches outside a transaction only)
                with current_copy(p) as readable:
                    _merge_one(conn, readable, p, summary)
            check = conn.execute("PRAGMA integrity_check").fetchone()[0]
            if check != "ok":
                raise StoreError(f"merged database failed its integrity check: {check}")
            conn.execute("PRAGMA journal_mode=DELETE")   # one self-contained file to rename
        finally:
            conn.close()
        _replace(tmp, out)
    except BaseException:
        for leftover in (tmp, Path(f"{tmp}-journal"), Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            with contextlib.suppress(OSError):
                leftover.unlink()
        raise
    return summary


def _prepare(out: Path, tmp: Path) -> None:
    """The temporary output: a copy of the existing output (merging into it), else a new empty database."""
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    if out.exists():
        check_schema(out)
        copy_database(out, tmp)
    db = Database(sqlite3.connect(str(tmp)))
    schema.apply(db)   # a new file gets the tables; an older output its newer migrations
    db.conn.close()


def _replace(tmp: Path, out: Path) -> None:
    """Rename the finished file over the output; the old output's WAL and shared-memory files would belong to the
    old file, so they go (their content was copied before)."""
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, out)
    for stale in (Path(f"{out}-wal"), Path(f"{out}-shm")):
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA main.table_info({table})") if r[1] != "id"]


def _insert(conn: sqlite3.Connection, table: str, row: Row, cols: list[str]) -> int:
    cur = conn.execute(f"INSERT INTO main.{table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                       [row.get(c) for c in cols])
    if cur.lastrowid is None:   # pragma: no cover - sqlite3 always sets it after an INSERT
        raise StoreError(f"merge: an INSERT into {table} returned no row id")
    return int(cur.lastrowid)


def _run_identity(started_at: str, command_line: str | None, env_hash: str | None) -> tuple[str, str, str]:
    return (str(started_at), str(command_line or ""), str(env_hash or ""))


def _merge_one(conn: sqlite3.Connection, readable: Path, shown: Path, summary: MergeSummary) -> None:
    conn.execute("ATTACH DATABASE ? AS src", (f"file:{readable}?mode=ro",))
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            run_map = _merge_runs(conn, shown, summary)
            _merge_tunes(conn, run_map, summary)
            _merge_peaks(conn, summary)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    finally:
        conn.execute("DETACH DATABASE src")


def _env_id(conn: sqlite3.Connection, src_env_id: int | None, cache: dict[int, int]) -> int | None:
    """The output's environment row for the input's `src_env_id` (shared by hash)."""
    if src_env_id is None:
        return None
    if src_env_id not in cache:
        row = conn.execute("SELECT * FROM src.environments WHERE id = ?", (src_env_id,)).fetchone()
        if row is None:
            return None
        cols = _columns(conn, "environments")
        conn.execute(f"INSERT INTO main.environments ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
                     " ON CONFLICT (hash) DO NOTHING", [row[c] for c in cols])
        cache[src_env_id] = int(conn.execute("SELECT id FROM main.environments WHERE hash = ?",
                                             (row["hash"],)).fetchone()[0])
    return cache[src_env_id]


def _merge_runs(conn: sqlite3.Connection, shown: Path, summary: MergeSummary) -> dict[int, int]:
    """Every run of `src` not already in the output, with its results and samples. Returns input run id ->
    output run id for every run that is in the output now (added or already there)."""
    present = {_run_identity(r[0], r[1], r[2]): int(r[3]) for r in conn.execute(
        "SELECT r.started_at, r.command_line, e.hash, r.id FROM main.runs r"
        " LEFT JOIN main.environments e ON e.id = r.environment_id")}
    env_cache: dict[int, int] = {}
    run_map: dict[int, int] = {}
    run_cols = _columns(conn, "runs")
    runs = conn.execute("SELECT r.*, e.hash AS env_hash FROM src.runs r"
                        " LEFT JOIN src.environments e ON e.id = r.environment_id ORDER BY r.id").fetchall()
    for run in runs:
        d = dict(run)
        ident = _run_identity(d["started_at"], d["command_line"], d["env_hash"])
        if ident in present:
            run_map[d["id"]] = present[ident]
            summary.runs_skipped += 1
            continue
        owner = owner_of(run)
        if d["status"] == "running" and owner_alive(owner):
            summary.notes.append(f"{shown}: run {d['id']} is still running: not merged (merge again when it ended)")
            continue
        d["status"] = effective_status(str(d["status"]), owner)
        d["environment_id"] = _env_id(conn, d["environment_id"], env_cache)
        new_id = _insert(conn, "runs", d, run_cols)
        present[ident] = run_map[d["id"]] = new_id
        summary.runs_added += 1
        _merge_results(conn, d["id"], new_id, summary)
    return run_map


def _merge_results(conn: sqlite3.Connection, src_run: int, new_run: int, summary: MergeSummary) -> None:
    """One run's results: commands and variants shared by content, kernels copied, samples in one statement."""
    conn.execute(
        "INSERT INTO main.commands (text, op, func_name, signature) SELECT c.text, c.op, c.func_name, c.signature"
        " FROM src.commands c WHERE c.id IN (SELECT command_id FROM src.results WHERE run_id = ?) AND true"
        " ON CONFLICT (text) DO UPDATE SET signature = COALESCE(commands.signature, excluded.signature)", (src_run,))
    vcols = _columns(conn, "variants")
    conn.execute(
        f"INSERT INTO main.variants ({', '.join(vcols)}) SELECT {', '.join('v.' + c for c in vcols)}"
        " FROM src.variants v WHERE v.id IN (SELECT variant_id FROM src.results WHERE run_id = ?) AND true"
        " ON CONFLICT (content_hash) DO NOTHING", (src_run,))
    commands = {r[0]: r[1] for r in conn.execute(
        "SELECT sc.id, mc.id FROM src.commands sc JOIN main.commands mc ON mc.text = sc.text"
        " WHERE sc.id IN (SELECT command_id FROM src.results WHERE run_id = ?)", (src_run,))}
    variants = {r[0]: r[1] for r in conn.execute(
        "SELECT sv.id, mv.id FROM src.variants sv JOIN main.variants mv ON mv.content_hash = sv.content_hash"
        " WHERE sv.id IN (SELECT variant_id FROM src.results WHERE run_id = ?)", (src_run,))}
    kcols, rcols = _columns(conn, "kernels"), _columns(conn, "results")
    kernels: dict[int, int] = {}
    for k in conn.execute("SELECT * FROM src.kernels WHERE id IN (SELECT kernel_id FROM src.results"
                          " WHERE run_id = ?)", (src_run,)).fetchall():
        d = dict(k)
        d["variant_id"] = variants.get(d["variant_id"]) if d["variant_id"] is not None else None
        kernels[d["id"]] = _insert(conn, "kernels", d, kcols)
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS merge_results (old INTEGER PRIMARY KEY, new INTEGER NOT NULL)")
    conn.execute("DELETE FROM temp.merge_results")
    mapping = []
    for r in conn.execute("SELECT * FROM src.results WHERE run_id = ? ORDER BY id", (src_run,)).fetchall():
        d = dict(r)
        d["run_id"] = new_run
        d["command_id"] = commands[d["command_id"]]
        d["variant_id"] = variants[d["variant_id"]]
        d["kernel_id"] = kernels.get(d["kernel_id"]) if d["kernel_id"] is not None else None
        mapping.append((d["id"], _insert(conn, "results", d, rcols)))
    conn.executemany("INSERT INTO temp.merge_results (old, new) VALUES (?, ?)", mapping)
    cur = conn.execute("INSERT INTO main.samples (result_id, idx, latency_us, cpu_us)"
                       " SELECT m.new, s.idx, s.latency_us, s.cpu_us"
                       " FROM temp.merge_results m JOIN src.samples s ON s.result_id = m.old")
    summary.results_added += len(mapping)
    summary.samples_added += max(cur.rowcount, 0)


def _merge_tunes(conn: sqlite3.Connection, run_map: dict[int, int], summary: MergeSummary) -> None:
    present = {(r[0], r[1] or "", r[2] or "") for r in conn.execute(
        "SELECT started_at, command_line, environment FROM main.tunes")}
    tcols = _columns(conn, "tunes")
    kcols = [r[1] for r in conn.execute("PRAGMA main.table_info(tune_kernels)")]
    ccols = [r[1] for r in conn.execute("PRAGMA main.table_info(tune_candidates)")]
    for t in conn.execute("SELECT * FROM src.tunes ORDER BY id").fetchall():
        d = dict(t)
        ident = (d["started_at"], d["command_line"] or "", d["environment"] or "")
        if ident in present:
            continue
        present.add(ident)
        new_id = _insert(conn, "tunes", d, tcols)
        summary.tunes_added += 1
        for (run_id,) in conn.execute("SELECT run_id FROM src.tune_runs WHERE tune_id = ?", (d["id"],)).fetchall():
            if run_id in run_map:
                conn.execute("INSERT OR IGNORE INTO main.tune_runs (tune_id, run_id) VALUES (?, ?)",
                             (new_id, run_map[run_id]))
        for table, cols in (("tune_kernels", kcols), ("tune_candidates", ccols)):
            for row in conn.execute(f"SELECT * FROM src.{table} WHERE tune_id = ?", (d["id"],)).fetchall():
                r = dict(row)
                r["tune_id"] = new_id
                if "run_id" in r and r["run_id"] is not None:
                    r["run_id"] = run_map.get(r["run_id"])
                conn.execute(f"INSERT INTO main.{table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                             [r.get(c) for c in cols])


def _merge_peaks(conn: sqlite3.Connection, summary: MergeSummary) -> None:
    present = {tuple(r) for r in conn.execute(
        "SELECT machine_key, target, measured_at, kind, COALESCE(dtype, '') FROM main.peaks")}
    cols = _columns(conn, "peaks")
    env_cache: dict[int, int] = {}
    for p in conn.execute("SELECT * FROM src.peaks ORDER BY id").fetchall():
        d = dict(p)
        ident = (d["machine_key"], d["target"], d["measured_at"], d["kind"], d["dtype"] or "")
        if ident in present:
            continue
        present.add(ident)
        d["environment_id"] = _env_id(conn, d["environment_id"], env_cache)
        _insert(conn, "peaks", d, cols)
        summary.peaks_added += 1
