"""JobResult <-> table rows. Pure functions, so the mapping can be tested without threads."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import operator
from typing import Any

from ..results import CacheMode, CompileInfo, JobResult, NumericsInfo, NumericsVerdict, Stats, Status

#: a value of a column as sqlite3 binds and returns it (the Python types of SQLite's storage classes)
SqlValue = str | int | float | bytes | None
#: a table row by column name, as written
Row = dict[str, SqlValue]

STAT_FIELDS = ("n", "min_us", "median_us", "mean_us", "max_us", "stddev_us", "p10_us", "p90_us", "iqr_us",
               "gflops", "gbps")


#: one encoder for every nested column (json.dumps with options builds one per call: ~2 us of a signature's 9)
_ENCODER = json.JSONEncoder(sort_keys=True, default=str)


def dumps(value: object) -> str | None:
    """JSON text for a nested column; NULL for None so 'not known' stays distinguishable from '{}'."""
    if value is None:
        return None
    return _ENCODER.encode(value)


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def sha256_json(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def _bool_or_none(v: int | None) -> bool | None:
    return None if v is None else bool(v)


def result_row(result: JobResult) -> Row:
    """The `results` columns a JobResult fills (ids are added by the writer)."""
    row: Row = {
        "job_id": result.job_id,
        "target": result.target,
        "backend": result.backend,
        "func_name": result.func_name,
        "status": result.status,
        "error": result.error,
        "source": result.source,
        "calls": result.calls,
        "share": result.share,
        "captured_us": result.captured_us,
        "block_k": result.block_k,
        "warmup_calls": result.warmup_calls,
        "noisy": int(bool(result.noisy)),
        "noise_reason": result.noise_reason,
        "host_load": result.host_load,
        "disturbed": result.disturbed,
        "steal": result.steal,
        "rounds": dumps(result.rounds) if result.rounds else None,
        "numerics": result.numerics.verdict if result.numerics else None,
        "numerics_stats": dumps(result.numerics.stats) if result.numerics else None,
        "reproducer": result.reproducer,
        "started_at": result.started_at,
        "finished_at": result.finished_at,
        "cache_mode": result.cache_mode,
        "device": result.device,
        "node": result.node,
        "roofline_us": result.roofline_us,
        "pct_roofline": result.pct_roofline,
        "device_us": result.device_us,
        "device_detail": dumps(result.device_detail),
        "throttled": int(bool(result.throttled)),
        "breakdown": dumps(result.breakdown),
    }
    stats = result.stats
    for f in STAT_FIELDS:
        row[f] = getattr(stats, f) if stats is not None else None
    return row


#: the columns of a row that only says what its job is (queued, or failed before it ran: a bad line); every other
#: column of such a row is NULL, and it has no samples and no kernel (`bare_row`)
BARE_COLUMNS = ("job_id", "target", "backend", "func_name", "status", "error", "source", "calls", "share",
                "captured_us", "noisy", "cache_mode", "throttled", "started_at", "finished_at")
#: where a bare row (command text, op, variant, *BARE_COLUMNS) holds its status
BARE_STATUS = 3 + BARE_COLUMNS.index("status")
#: a JobResult's fields a bare row reads, and those that must be empty in one: every other field is None by
#: default, and None in a bare result (tests/test_many_rows.py checks that each field is one of the three)
_BARE_FIELDS = ("command", "op", "variant", *BARE_COLUMNS)
_LIST_FIELDS = ("samples_us", "cpu_us", "rounds")
_OPTIONAL_FIELDS = tuple(f.name for f in dataclasses.fields(JobResult)
                         if f.name not in _BARE_FIELDS and f.name not in _LIST_FIELDS)
_optional = operator.attrgetter(*_OPTIONAL_FIELDS)
_bare = operator.attrgetter(*_BARE_FIELDS)
_NOISY, _THROTTLED = _BARE_FIELDS.index("noisy"), _BARE_FIELDS.index("throttled")


def bare_row(result: JobResult) -> tuple[Any, ...] | None:
    """(command text, op, variant, *BARE_COLUMNS) of a result that only says what its job is (queued, or failed
    before it ran), which a caller may store in bulk with its neighbours: the values `result_row` gives those
    columns. None for any other result (a measurement, a kernel, samples, ...)."""
    if result.samples_us or result.cpu_us or result.rounds or _optional(result).count(None) != len(_OPTIONAL_FIELDS):
        return None
    values = list(_bare(result))
    values[_NOISY] = int(bool(values[_NOISY]))
    values[_THROTTLED] = int(bool(values[_THROTTLED]))
    return tuple(values)


def stored_status(text: str) -> Status:
    """A stored status as the vocabulary's: a database may come from someone else (or a newer boo-tui), and a value
    outside it is read as a failed job rather than carried as text nothing else knows."""
    try:
        return Status(text)
    except ValueError:
        return Status.FAILED


def stored_cache_mode(text: str | None) -> CacheMode:
    try:
        return CacheMode(text or CacheMode.WARM)
    except ValueError:
        return CacheMode.WARM


def result_from_bare(bare: tuple[Any, ...]) -> JobResult:
    """The result a bare row was made of (as far as its row goes: `result_row` of it is the same)."""
    command, op, variant, *values = bare
    row = dict(zip(BARE_COLUMNS, values))
    return JobResult(job_id=row["job_id"], command=command, func_name=row["func_name"], op=op, variant=variant,
                     target=row["target"], backend=row["backend"], status=stored_status(row["status"]),
                     error=row["error"],
                     source=row["source"], calls=row["calls"], share=row["share"],
                     captured_us=row["captured_us"], noisy=bool(row["noisy"]),
                     cache_mode=stored_cache_mode(row["cache_mode"]), throttled=bool(row["throttled"]),
                     started_at=row["started_at"],
                     finished_at=row["finished_at"])


def kernel_row(result: JobResult, variant_id: int) -> Row | None:
    c = result.compile
    if c is None:
        return None
    return {
        "func_name": result.func_name,
        "target": result.target,
        "variant_id": variant_id,
        "artifact": c.artifact,
        "cache_key": c.key,
        "compile_seconds": c.seconds,
        "cache_hit": int(bool(c.cache_hit)),
        "compiler_version": c.compiler_version,
        "num_dispatches": c.num_dispatches,
        "compile_command": dumps(list(c.command)),
        "compile_error": c.error,
        "spec_applied": None if c.spec_applied is None else int(bool(c.spec_applied)),
        "build": c.build,
        "chosen_by": c.chosen_by,
    }


def variant_row(name: str, *, flags: list[str] | None = None, spec_text: str | None = None,
                details: dict[str, Any] | None = None) -> Row:
    """A variants row, identified by its content: the same name, flags, spec and details map to the same row,
    and editing a spec between runs gives a new row (so old results keep pointing at what they measured)."""
    flags_list = list(flags) if flags else []
    row: Row = {
        "name": name,
        "flags": dumps(flags_list),
        "spec_text": spec_text,
        "spec_hash": hashlib.sha256(spec_text.encode()).hexdigest() if spec_text is not None else None,
        "details": dumps(details),
    }
    row["content_hash"] = sha256_json([name, flags_list, spec_text, details])
    return row


def environment_row(env: dict[str, Any]) -> Row:
    return {
        "hash": sha256_json(env),
        "host": env.get("host"),
        "os": env.get("os"),
        "cpu": env.get("cpu"),
        "cores": env.get("cores_logical", env.get("cores")),
        "gpu": env.get("gpu"),
        "gpu_arch": env.get("gpu_arch"),
        "driver": env.get("driver"),
        "iree_compile_version": env.get("iree_compile_version"),
        "iree_runtime_version": env.get("iree_runtime_version"),
        "torch_version": env.get("torch_version"),
        "tool_version": env.get("tool_version"),
        "details": dumps(env),
    }


def job_result_from_row(row: dict[str, Any], samples: list[float], cpu: list[float] | None = None) -> JobResult:
    """Rebuild a JobResult from a joined results/commands/variants/kernels row (see queries.RESULT_SELECT)."""
    stats = _stats_from_row(row)
    numerics = _numerics_from_row(row)
    compile_info = _compile_info_from_row(row)
    return JobResult(
        job_id=row["job_id"],
        command=row["command"],
        func_name=row["func_name"],
        op=row["op"],
        variant=row["variant"],
        target=row["target"],
        backend=row["backend"],
        status=stored_status(row["status"]),
        error=row["error"],
        source=row["source"],
        calls=row["calls"],
        share=row["share"],
        captured_us=row.get("captured_us"),
        stats=stats,
        samples_us=samples,
        block_k=row["block_k"],
        warmup_calls=row["warmup_calls"],
        noisy=bool(row["noisy"]),
        noise_reason=row["noise_reason"],
        host_load=row["host_load"],
        cpu_us=cpu if cpu is not None and len(cpu) == len(samples) else [],
        rounds=[int(x) for x in loads(row.get("rounds")) or []],
        disturbed=row.get("disturbed"),
        steal=row.get("steal"),
        numerics=numerics,
        compile=compile_info,
        reproducer=row["reproducer"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        cache_mode=stored_cache_mode(row["cache_mode"]),
        device=row["device"],
        node=row.get("node"),
        roofline_us=row["roofline_us"],
        pct_roofline=row["pct_roofline"],
        device_us=row["device_us"],
        device_detail=loads(row["device_detail"]),
        throttled=bool(row["throttled"]),
        breakdown=loads(row.get("breakdown")),
    )


def _stats_from_row(row: dict[str, Any]) -> Stats | None:
    """The row's latency statistics; None when it has none."""
    if row["n"] is None:
        return None
    return Stats(**{f: row[f] for f in STAT_FIELDS})


def _numerics_from_row(row: dict[str, Any]) -> NumericsInfo | None:
    """The row's numerics check; None without one."""
    if row["numerics"] not in tuple(NumericsVerdict):   # (a value outside the vocabulary: no verdict)
        return None
    return NumericsInfo(verdict=NumericsVerdict(row["numerics"]), stats=loads(row["numerics_stats"]) or {})


def _compile_info_from_row(row: dict[str, Any]) -> CompileInfo | None:
    """How the row's kernel was built; None without a kernel."""
    if row["kernel_id"] is None:
        return None
    return CompileInfo(
        seconds=row["compile_seconds"] if row["compile_seconds"] is not None else 0.0,
        cache_hit=bool(row["cache_hit"]),
        command=loads(row["compile_command"]) or [],
        artifact=row["artifact"],
        key=row["cache_key"],
        compiler_version=row["compiler_version"],
        num_dispatches=row["num_dispatches"],
        error=row["compile_error"],
        spec_applied=_bool_or_none(row["spec_applied"]),
        build=row.get("build"),
        chosen_by=row.get("chosen_by"),
    )
