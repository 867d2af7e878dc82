"""The results database schema, as sqlite-utils migrations (applied in order, each once, recorded in
`_sqlite_migrations`). Never edit an applied migration: add a new one.

Design: plain columns for everything one filters or sorts on, foreign keys between tables (so `datasette` links
them), JSON text only for nested detail. Times of runs are ISO-8601 UTC text (readable in any browser); times of
results are Unix seconds (REAL) because the session hands them over as such and they must round-trip exactly.
"""
from __future__ import annotations

from sqlite_utils import Database, Migrations

migrations = Migrations("boo_results")

_INITIAL = """
CREATE TABLE environments (
    id INTEGER PRIMARY KEY,
    hash TEXT NOT NULL UNIQUE,            -- sha256 of details: identical machines share one row
    host TEXT,
    os TEXT,
    cpu TEXT,
    cores INTEGER,
    gpu TEXT,
    gpu_arch TEXT,
    driver TEXT,
    iree_compile_version TEXT,
    iree_runtime_version TEXT,
    torch_version TEXT,
    tool_version TEXT,
    details TEXT                          -- JSON: the whole collect_environment() dict
);

CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    status TEXT NOT NULL DEFAULT 'running',   -- running | done | failed | interrupted | cancelled
    command_line TEXT,
    tool_version TEXT,
    target TEXT,
    config TEXT,                              -- JSON
    environment_id INTEGER REFERENCES environments(id)
);

CREATE TABLE commands (
    id INTEGER PRIMARY KEY,
    text TEXT NOT NULL UNIQUE,
    op TEXT,
    func_name TEXT,
    signature TEXT                            -- JSON (OpSignature.describe()), when known
);

CREATE TABLE variants (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    flags TEXT,                               -- JSON list of extra iree-compile flags
    spec_text TEXT,                           -- tuning spec content (what was compiled, not just a path)
    spec_hash TEXT,                           -- sha256 of spec_text
    details TEXT,                             -- JSON (Variant.describe() and anything else)
    content_hash TEXT NOT NULL UNIQUE         -- deduplication: same name + flags + spec + details = same row
);

CREATE TABLE kernels (
    id INTEGER PRIMARY KEY,
    func_name TEXT,
    target TEXT,
    variant_id INTEGER REFERENCES variants(id),
    artifact TEXT,
    cache_key TEXT,
    compile_seconds REAL,
    cache_hit INTEGER,
    compiler_version TEXT,
    num_dispatches INTEGER,
    compile_command TEXT,                     -- JSON list: the exact iree-compile argv
    compile_error TEXT,
    spec_applied INTEGER
);
CREATE INDEX idx_kernels_cache_key ON kernels(cache_key);

CREATE TABLE results (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    job_id TEXT NOT NULL,
    command_id INTEGER NOT NULL REFERENCES commands(id),
    variant_id INTEGER NOT NULL REFERENCES variants(id),
    kernel_id INTEGER REFERENCES kernels(id),
    target TEXT,
    backend TEXT,
    func_name TEXT,                           -- the kernel's name when measured (naming schemes may change)
    status TEXT NOT NULL,
    error TEXT,
    source TEXT,
    n INTEGER,
    min_us REAL,
    median_us REAL,
    mean_us REAL,
    max_us REAL,
    stddev_us REAL,
    p10_us REAL,
    p90_us REAL,
    iqr_us REAL,
    gflops REAL,
    gbps REAL,
    block_k INTEGER,
    warmup_calls INTEGER,
    noisy INTEGER NOT NULL DEFAULT 0,
    noise_reason TEXT,
    host_load REAL,
    numerics TEXT,                            -- pass | fail | NULL (not checked)
    numerics_stats TEXT,                      -- JSON
    reproducer TEXT,
    started_at REAL,
    finished_at REAL,
    UNIQUE (run_id, job_id)
);
CREATE INDEX idx_results_command ON results(command_id);
CREATE INDEX idx_results_variant ON results(variant_id);
CREATE INDEX idx_results_status ON results(run_id, status);

-- Every raw sample, one row each. WITHOUT ROWID clusters a result's samples together on disk
-- (a range scan to load them, ~20 bytes a row).
CREATE TABLE samples (
    result_id INTEGER NOT NULL REFERENCES results(id),
    idx INTEGER NOT NULL,
    latency_us REAL NOT NULL,
    PRIMARY KEY (result_id, idx)
) WITHOUT ROWID;

-- One readable row per result for browsing (datasette, sqlite3 shell): names instead of ids.
CREATE VIEW result_summary AS
SELECT r.run_id, r.job_id, c.text AS command, r.func_name, v.name AS variant, r.target, r.backend,
       r.status, r.n, r.median_us, r.min_us, r.p10_us, r.p90_us, r.gflops, r.gbps, r.numerics,
       r.noisy, r.noise_reason, k.cache_hit, k.compile_seconds, k.spec_applied, r.error, r.id AS result_id
FROM results r
JOIN commands c ON c.id = r.command_id
JOIN variants v ON v.id = r.variant_id
LEFT JOIN kernels k ON k.id = r.kernel_id;
"""


@migrations()
def m001_initial(db: Database) -> None:
    for statement in _INITIAL.split(";\n"):
        if statement.strip():
            db.execute(statement)


@migrations()
def m002_run_owner(db: Database) -> None:
    """The process that owns a run (store/owner.py): a `running` run whose process died reads as interrupted."""
    db.execute("ALTER TABLE runs ADD COLUMN owner_pid INTEGER")
    db.execute("ALTER TABLE runs ADD COLUMN owner_host TEXT")
    db.execute("ALTER TABLE runs ADD COLUMN owner_started INTEGER")   # /proc start time: tells a reused pid apart


_TUNES = """
CREATE TABLE tunes (
    id INTEGER PRIMARY KEY,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    status TEXT NOT NULL DEFAULT 'running',   -- running | done | interrupted | failed
    command_line TEXT,
    target TEXT,
    out_dir TEXT,
    settings TEXT,                            -- JSON: budget, seed, min-effect, stage times ...
    environment TEXT                          -- JSON: the machine it tuned on
);

CREATE TABLE tune_runs (
    tune_id INTEGER NOT NULL REFERENCES tunes(id),
    run_id INTEGER NOT NULL REFERENCES runs(id),
    PRIMARY KEY (tune_id, run_id)
);

CREATE TABLE tune_kernels (
    tune_id INTEGER NOT NULL REFERENCES tunes(id),
    func_name TEXT NOT NULL,
    command TEXT NOT NULL,
    status TEXT NOT NULL,                     -- running | improved | no_better | failed
    root TEXT,                                -- JSON: the op the specs configure
    baseline_us REAL,
    best_key TEXT,
    best_us REAL,
    ratio REAL,
    ci_low REAL,
    ci_high REAL,
    p_value REAL,
    verdict TEXT,
    message TEXT,
    candidates INTEGER,
    seconds REAL,
    PRIMARY KEY (tune_id, func_name)
);

CREATE TABLE tune_candidates (
    tune_id INTEGER NOT NULL REFERENCES tunes(id),
    func_name TEXT NOT NULL,
    key TEXT NOT NULL,                        -- digest of the configuration: same config, same key
    params TEXT NOT NULL,                     -- JSON: flags, formulation, tiles
    variant TEXT NOT NULL,                    -- the variant name its jobs were measured as
    spec TEXT,                                -- the tuning spec text (null: flags / formulation only)
    stage TEXT NOT NULL,                      -- screen | halving-N | final: the last stage it reached
    status TEXT NOT NULL,      -- measured | compile_failed | not_applied | numerics_failed | failed | duplicate
    error TEXT,
    compile_seconds REAL,
    artifact_key TEXT,                        -- digest of its binary (identical binaries: one candidate)
    median_us REAL,
    baseline_us REAL,
    ratio REAL,                               -- median / the baseline's median measured beside it
    ci_low REAL,
    ci_high REAL,
    verdict TEXT,
    job_id TEXT,
    run_id INTEGER,
    updated_at TEXT,
    PRIMARY KEY (tune_id, func_name, key)
);
CREATE INDEX tune_candidates_kernel ON tune_candidates(tune_id, func_name);
"""


@migrations()
def m003_tunes(db: Database) -> None:
    """`boo-tui tune`: every tune, the runs it measured in, each kernel's outcome and every candidate tried."""
    for statement in _TUNES.split(";\n"):
        if statement.strip():
            db.execute(statement)


@migrations()
def m004_weights(db: Database) -> None:
    """Each command's weight in the model it was captured from (a `# boo-tui: calls=N share=P%` line of its
    commands file), kept with the run's jobs so history, exports of a saved run and `--resume` keep them;
    `result_summary` shows them."""
    db.execute("ALTER TABLE results ADD COLUMN calls INTEGER")   # times the model called the kernel (>= 1)
    db.execute("ALTER TABLE results ADD COLUMN share REAL")      # its share of the model's eager time, percent
    db.execute("DROP VIEW IF EXISTS result_summary")
    db.execute("""
CREATE VIEW result_summary AS
SELECT r.run_id, r.job_id, c.text AS command, r.func_name, v.name AS variant, r.target, r.backend,
       r.status, r.n, r.median_us, r.min_us, r.p10_us, r.p90_us, r.gflops, r.gbps, r.numerics,
       r.noisy, r.noise_reason, k.cache_hit, k.compile_seconds, k.spec_applied, r.error, r.id AS result_id,
       r.calls, r.share
FROM results r
JOIN commands c ON c.id = r.command_id
JOIN variants v ON v.id = r.variant_id
LEFT JOIN kernels k ON k.id = r.kernel_id""")


@migrations()
def m005_limits(db: Database) -> None:
    """How close to the limit, and where: the cache mode a result was timed in, the device that measured it,
    its roofline (least time on the measured peaks) and % of it, the GPU's own dispatch time beside the wall
    time, the GPU's state while measuring; and the machine's measured peaks (`boo-tui peak`), per environment."""
    for col, typ in (("cache_mode", "TEXT NOT NULL DEFAULT 'warm'"), ("device", "TEXT"), ("roofline_us", "REAL"),
                     ("pct_roofline", "REAL"), ("device_us", "REAL"), ("device_detail", "TEXT"),
                     ("throttled", "INTEGER NOT NULL DEFAULT 0")):
        db.execute(f"ALTER TABLE results ADD COLUMN {col} {typ}")
    db.execute("""
CREATE TABLE peaks (
    id INTEGER PRIMARY KEY,
    machine_key TEXT NOT NULL,          -- what the peaks depend on: device (resolved CPU or GPU), compiler, runtime
    target TEXT NOT NULL,               -- cpu, cuda:sm_80, hip:gfx942
    environment_id INTEGER REFERENCES environments(id),
    measured_at TEXT NOT NULL,
    kind TEXT NOT NULL,                 -- compute | bandwidth
    dtype TEXT,                         -- float32 / float16 / bfloat16 for compute; NULL for bandwidth
    value REAL NOT NULL,                -- GFLOP/s (compute) or GB/s (bandwidth)
    source TEXT,                        -- what reached it: 'iree matmul 1024^3', 'torch.matmul', 'stream copy'
    theoretical REAL,                   -- the datasheet / feature-and-clock figure, where known
    details TEXT                        -- JSON: every candidate measured, clocks, sizes
)""")
    db.execute("CREATE INDEX idx_peaks_machine ON peaks(machine_key, target)")
    db.execute("DROP VIEW IF EXISTS result_summary")
    db.execute("""
CREATE VIEW result_summary AS
SELECT r.run_id, r.job_id, c.text AS command, r.func_name, v.name AS variant, r.target, r.backend,
       r.status, r.n, r.median_us, r.min_us, r.p10_us, r.p90_us, r.gflops, r.gbps, r.numerics,
       r.noisy, r.noise_reason, k.cache_hit, k.compile_seconds, k.spec_applied, r.error, r.id AS result_id,
       r.calls, r.share, r.cache_mode, r.device, r.roofline_us, r.pct_roofline, r.device_us, r.throttled
FROM results r
JOIN commands c ON c.id = r.command_id
JOIN variants v ON v.id = r.variant_id
LEFT JOIN kernels k ON k.id = r.kernel_id""")


@migrations()
def m006_models(db: Database) -> None:
    """Models measured end to end (`boo-tui model`): where a pass's time goes, per kernel, as JSON."""
    db.execute("ALTER TABLE results ADD COLUMN breakdown TEXT")


@migrations()
def m007_nodes(db: Database) -> None:
    """The Ray node that measured a result (`--ray`: host/node-id); NULL when this host did."""
    db.execute("ALTER TABLE results ADD COLUMN node TEXT")


@migrations()
def m008_timing_evidence(db: Database) -> None:
    """What a verdict needs to know about a result's samples: the measuring thread's CPU time beside each sample
    (a sample whose thread lost its core is counted at it), how many samples lost their core, the hypervisor's
    steal while measuring, and the measuring rounds (samples per round, JSON; each a fresh placement on the CPU)."""
    db.execute("ALTER TABLE samples ADD COLUMN cpu_us REAL")
    for col, typ in (("disturbed", "INTEGER"), ("steal", "REAL"), ("rounds", "TEXT")):
        db.execute(f"ALTER TABLE results ADD COLUMN {col} {typ}")


@migrations()
def m009_captured_us(db: Database) -> None:
    """A weighted command's time in the capture it came from (the `us=` of its `# boo-tui:` line, microseconds):
    the model line sets the measured sum against it. NULL for files that give none (captured before it)."""
    db.execute("ALTER TABLE results ADD COLUMN captured_us REAL")


def apply(db: Database) -> None:
    """Bring `db` to the current schema. Safe to call on every open and from several processes at once: the
    whole check-and-apply runs under one write lock (BEGIN IMMEDIATE), so two processes opening a new file
    together cannot both create the tables."""
    if not migrations.pending(db):
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        migrations.apply(db)   # nested: each migration runs in a savepoint of this transaction
    except BaseException:
        db.rollback()
        raise
    db.commit()
