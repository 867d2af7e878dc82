"""What Ray adds (--ray), on this machine's loopback.

1. Per job: the same commands measured locally and through a one-node local cluster (2 CPUs), kernels already
   in the cache, iree backend, `--iter` samples each. Reported: the run's wall time (start() to done) both ways,
   what Ray adds per job, and the medians side by side (the actor's benchmark worker is the same process a local
   run uses: its times should agree within noise).
2. Compile throughput: N distinct kernels (default: the 413 real-model convs when given with --commands-file,
   else BOO's sample convs scaled up to 413) compiled for gfx942 with an empty cache, by one local CompilePool
   (one worker per core) and by a simulated two-machine cluster (two Ray nodes on loopback, 1 CPU each), the
   nodes' entries travelling to this host through the object store. Reported: wall times, the mean compile
   time per kernel, this host's serial share per kernel (landing an entry in its cache), and what N nodes would
   take, extrapolated from those per-job costs.

    python3 benchmarks/bench_ray.py [--commands-file F] [--kernels 413] [--iter 200] [--skip-compile]
Needs the ray extra. Run on a quiet machine: both parts are wall times.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SMALL = [
    "conv -n 1 -c 8 -H 16 -W 16 -k 8 -y 3 -x 3",
    "conv -n 2 -c 16 -H 16 -W 16 -k 16 -y 3 -x 3",
    "conv -n 1 -c 32 -H 8 -W 8 -k 32 -y 1 -x 1",
    "gemm -m 64 -n 64 -k 64",
    "gemm -m 128 -n 128 -k 128",
    "gemm -m 256 -n 64 -k 32",
    "layernorm --input 4x64 --normalized_dim 1 -F 1",
    "layernorm --input 16x256 --normalized_dim 1 -F 1",
]


def _open(cache_dir: str, db: str, iters: int, ray_address: str | None = None):
    from boo_engine.config import SessionConfig
    from boo_engine.session import Session

    cfg = SessionConfig(target="cpu", backends=("iree",), iters=iters, cache_dir=cache_dir, db_path=db,
                        ray_address=ray_address, verify_numerics=False)
    s = Session(cfg)
    s.add_inputs(SMALL)
    s.start()                     # the first pass starts the worker (or the actor) and compiles: not timed
    assert s.wait(timeout=1800)
    return s


def _rerun(s) -> tuple[float, dict[str, float]]:
    ids = list(s.jobs)
    t0 = time.perf_counter()
    s.rerun(ids)
    assert s.wait(timeout=1800)
    wall = time.perf_counter() - t0
    res = {r.func_name: r for r in s.jobs.values()}
    assert all(r.status == "done" for r in res.values()), [(r.func_name, r.error) for r in res.values()]
    return wall, {k: r.stats.median_us for k, r in res.items()}


def per_job(iters: int, rounds: int = 3) -> dict:
    """Both sessions open at once, their workers warm; passes alternate local / ray `rounds` times."""
    from boo_engine.cluster.connect import Cluster
    from boo_engine.cluster.loopback import LoopbackCluster

    tmp = tempfile.mkdtemp(prefix="bench-ray-")
    cache = f"{tmp}/kernels"
    with LoopbackCluster(cpus=2) as c:
        t0 = time.perf_counter()
        Cluster(c.address)
        join_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        remote_s = _open(cache, f"{tmp}/ray.db", iters, c.address)
        first_ray = time.perf_counter() - t0
        local_s = _open(cache, f"{tmp}/local.db", iters)
        control_s = _open(cache, f"{tmp}/control.db", iters)   # a second local worker process: the control
        walls: dict[str, list[float]] = {"local": [], "ray": [], "control": []}
        medians: dict[str, dict[str, list[float]]] = {"local": {}, "ray": {}, "control": {}}
        for _ in range(rounds):
            for mode, s in (("local", local_s), ("ray", remote_s), ("control", control_s)):
                wall, med = _rerun(s)
                walls[mode].append(wall)
                for k, v in med.items():
                    medians[mode].setdefault(k, []).append(v)
        local_s.close()
        remote_s.close()
        control_s.close()
        import ray

        ray.shutdown()
    n = len(SMALL)
    lw, rw = statistics.median(walls["local"]), statistics.median(walls["ray"])
    return {
        "jobs": n, "iters": iters, "rounds": rounds, "join_s": round(join_s, 2),
        "first_pass_actor_start_and_compiles_s": round(first_ray, 2),
        "local_wall_s": [round(w, 3) for w in walls["local"]], "ray_wall_s": [round(w, 3) for w in walls["ray"]],
        "added_per_job_ms": round((rw - lw) / n * 1e3, 1),
        # per kernel: the median over rounds of each mode's median: local, ray, ray / local, and the control: the
        # same kernels in a second local worker process / local (what changing process alone does)
        "medians_us": {k: [round(statistics.median(v), 2), round(statistics.median(medians["ray"][k]), 2),
                           round(statistics.median(medians["ray"][k]) / statistics.median(v), 3),
                           round(statistics.median(medians["control"][k]) / statistics.median(v), 3)]
                       for k, v in medians["local"].items()},
    }


def _bump(text: str, i: int) -> str:
    m = re.search(r"(-n )(\d+)", text)
    return text if m is None else text[:m.start(2)] + str(int(m.group(2)) + i) + text[m.end(2):]


def kernels(path: str | None, count: int) -> list[str]:
    if path:
        lines = [ln.strip() for ln in Path(path).read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    else:
        convs = [ln.strip() for ln in (ROOT / "sample_commands.txt").read_text().splitlines()
                 if ln.strip().startswith("conv")]
        lines = [_bump(convs[i % len(convs)], i // len(convs)) for i in range(count)]
    from boo_engine.commands import parse_command

    sigs, seen = [], set()
    for ln in lines:
        s = parse_command(ln)
        if s.func_name not in seen:
            seen.add(s.func_name)
            sigs.append(s)
    return sigs[:count]


def compile_throughput(path: str | None, count: int) -> dict:
    from boo_engine.cluster.compiling import RayCompilePool
    from boo_engine.cluster.connect import Cluster
    from boo_engine.cluster.loopback import LoopbackCluster
    from boo_engine.compile.cache import KernelCache
    from boo_engine.compile.pool import CompilePool

    sigs = kernels(path, count)
    target = "hip:gfx942"
    tmp = tempfile.mkdtemp(prefix="bench-ray-compile-")
    t0 = time.perf_counter()
    with CompilePool(cache=KernelCache(f"{tmp}/local")) as pool:
        arts = [f.result() for f in [pool.submit(s, target) for s in sigs]]
    local_wall = time.perf_counter() - t0
    compile_s = [a.compile_seconds for a in arts]
    print(f"local pool: {local_wall:.1f} s for {len(sigs)} kernels", file=sys.stderr, flush=True)
    with LoopbackCluster(cpus=1, loopback=False) as c:
        c.add_node(cpus=1)
        cluster = Cluster(c.address)
        print(f"cluster up: {len(cluster.nodes())} nodes", file=sys.stderr, flush=True)
        pool = RayCompilePool(cluster, KernelCache(f"{tmp}/driver"), node_cache=f"{tmp}/nodes")
        t0 = time.perf_counter()
        futures = [pool.submit(s, target) for s in sigs]
        arts_r = []
        for i, f in enumerate(futures):
            arts_r.append(f.result())
            if i % 50 == 0:
                print(f"  {i} landed, {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
        ray_wall = time.perf_counter() - t0
        pool.shutdown()
        import ray

        ray.shutdown()
    n = len(sigs)
    mean_c = statistics.fmean(compile_s)
    mean_ray_c = statistics.fmean(a.compile_seconds for a in arts_r)
    land = pool.land_s / max(pool.landed, 1)
    per_job_total = ray_wall * 2 / n          # CPU-seconds per kernel through Ray (2 CPUs in all)
    extrapolated = {str(k): round(n * per_job_total / k, 1) for k in (2, 4, 8, 16, 32)}
    return {
        "kernels": n, "target": target, "local_workers": os.cpu_count(),
        "local_wall_s": round(local_wall, 1), "ray_two_nodes_wall_s": round(ray_wall, 1),
        "mean_compile_s_local": round(mean_c, 3), "mean_compile_s_in_ray_task": round(mean_ray_c, 3),
        "ray_cpu_s_per_kernel": round(per_job_total, 3),
        "ray_overhead_per_job_s": round(per_job_total - mean_ray_c, 3),
        "driver_land_per_job_ms": round(land * 1e3, 2),
        "driver_serial_bound_s": round(n * land, 1),
        "extrapolated_wall_s_by_nodes_of_1_cpu": extrapolated,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--commands-file", default=None)
    ap.add_argument("--kernels", type=int, default=413)
    ap.add_argument("--iter", type=int, default=200)
    ap.add_argument("--skip-compile", action="store_true")
    ap.add_argument("--skip-per-job", action="store_true")
    a = ap.parse_args()
    out = {}
    if not a.skip_per_job:
        out["per_job"] = per_job(a.iter)
        print(json.dumps(out, indent=1), flush=True)
    if not a.skip_compile:
        out["compile"] = compile_throughput(a.commands_file, a.kernels)
        print(json.dumps(out["compile"], indent=1))


if __name__ == "__main__":
    main()
