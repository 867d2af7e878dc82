#!/usr/bin/env python3
"""The GPU path on a lent GPU, prepared here so that the device minutes go to measuring.

A lent GPU machine (docs/performance.md, "The GPU check") has Python 3.12, torch with CUDA and no internet, and
takes at most 64 MiB per call: iree-base-compiler's wheel (84 MB) does not fit. So every kernel is compiled
HERE for `cuda:sm_80` (IREE 3.13 has no Hopper target; its PTX is JIT-compiled by the driver), the cache folder
travels, and the device measures with the cache alone: with no iree-compile installed, compile.build resolves
kernels through the cache's prebuilt index and never imports iree.compiler.

    python3 benchmarks/gpu_check.py prepare [--dir .gpu]     # here: compile, tune offline, fetch the wheels
    bash benchmarks/gpu_check.sh                             # there, with .gpu carried: runs `run --out $OUT`

`prepare` fills DIR/cache (benchmarks/gpu_commands.txt and bench_gpu_path.py's kernels, baseline; the tune's
candidates for TUNE_COMMAND, compiled by the tuner's offline mode) and DIR/wheels (iree-base-runtime and the
pure-Python packages the measuring path imports that the device lacks, for Python 3.12), then prints the size.
The cache's entries are signed with DIR/cache-key, a key made for this bundle (not the user's own, which stays
here): it travels beside the cache, and gpu_check.sh names it in $BOO_CACHE_KEY there, so the device loads
exactly what was compiled here (README, "Security").

`run` (on the GPU; each step in its own process with a time limit, its log kept):
  env      the GPU, torch, the IREE runtime's drivers; proves that no compiler is importable
  sample   the GPU-sized sample commands headless (iree + torch, numerics), exported as Markdown and JSON
  path     bench_gpu_path.py: our median vs iree-benchmark-module on the same artifacts, dispatch time, cold L2
  tune     boo-tui tune of TUNE_COMMAND from the carried candidates, then its tuned.toml re-measured in a fresh
           process (the verified ratio)
  monitor  the GPU monitor (clocks, temperature, power, throttle reasons) over a long torch gemm and a long IREE one
  devices  --devices all on one GPU (every result on cuda:0) and --devices 0,1 (one line, exit 2)
and writes summary.txt, the exports, the database and a tarball of the logs to --out.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COMMANDS = REPO / "benchmarks" / "gpu_commands.txt"
ARCH = "sm_80"
TUNE_COMMAND = "gemmfp16 --a_w 4096 --a_h 4096 --b_w 4096"
TUNE_BUDGET = 16
STEPS = "tune,path,sample,monitor,devices"
#: what the measuring path imports that the lent machine's image lacks (KINDS.md), pinned to what is tested here
WHEELS = ["iree-base-runtime==3.13.0", "sqlite-utils==4.2.1", "sqlite-fts4==1.0.3", "click-default-group==1.2.4",
          "click==8.4.0", "optuna==5.0.0", "alembic==1.20.1", "SQLAlchemy==2.1.9", "colorlog==6.12.0",
          "Mako==1.4.3"]
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64"]
#: `boo-tui ARGS` through this Python (the device runs boo-tui from the source tree, not installed)
BOO = [sys.executable, "-c", "import sys; from boo_tui.cli import main; sys.exit(main())"]


def _bench_kernels() -> list[str]:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_gpu_path import KERNELS

    return list(KERNELS)


def _size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def _bundle_key(out: Path) -> Path:
    """DIR/cache-key: the key this bundle's cache is signed with, made once (0600, never replaced)."""
    import secrets

    key = out / "cache-key"
    if not key.exists():
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
    return key


def prepare(opts: argparse.Namespace) -> int:
    from boo_engine.commands import parse_command
    from boo_engine.compile.cache import KernelCache
    from boo_engine.compile.preload import format_summary, preload
    from boo_engine.tune.report import DEFAULT_OPT_LEVEL
    from boo_engine.variants import Variant

    out = Path(opts.dir).resolve()
    cache_dir = out / "cache"
    cache_dir.mkdir(parents=True, exist_ok=True)
    os.environ["BOO_CACHE_KEY"] = str(_bundle_key(out))   # the tune's process below signs with it too
    target = f"cuda:{opts.arch}"
    lines = [ln for ln in COMMANDS.read_text().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    sigs = [parse_command(t) for t in lines + _bench_kernels() + [TUNE_COMMAND]]
    summary = preload(sigs, target, cache=KernelCache(cache_dir))
    print(format_summary(summary), flush=True)
    # what tuned.toml says when no candidate won (the compiler's default, named): its re-measure needs it too
    default = Variant(name="tuned", flags=(DEFAULT_OPT_LEVEL,))
    again = preload([TUNE_COMMAND], target, (default,), cache=KernelCache(cache_dir))
    summary.items += again.items
    if summary.failed:
        return 1
    # the sample step's own columns (BOO's build, the best column) as `run` asks for them: compiled by the CLI
    # with the same options, so that what the device resolves through the prebuilt index is what a run builds
    cols = subprocess.run([*BOO, str(COMMANDS), "--target", target, "--compile-only", "--cache-dir", str(cache_dir),
                           "--db", str(out / "prepare.db")], text=True, capture_output=True)
    print(cols.stdout[-2000:], cols.stderr[-2000:], sep="\n", flush=True)
    if cols.returncode != 0:
        return 1
    # the tuner's offline mode: the device proposes the same seeded candidates and finds them compiled
    tune = subprocess.run([*BOO, "tune", TUNE_COMMAND, "--target", target, "--budget", str(opts.budget),
                           "--batch", str(opts.budget),
                           "--cache-dir", str(cache_dir), "--out", str(out / "tune-offline"),
                           "--db", str(out / "prepare.db")], text=True, capture_output=True)
    print(tune.stdout[-2000:], tune.stderr[-2000:], sep="\n", flush=True)
    if tune.returncode != 0:
        return 1
    wheels = out / "wheels"
    if not opts.no_wheels:
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
               "--python-version", "3.12", "--implementation", "cp", "-d", str(wheels)]
        for p in PLATFORMS:
            cmd += ["--platform", p]
        subprocess.run(cmd + WHEELS, check=True)
    (out / "manifest.json").write_text(json.dumps({
        "prepared": time.strftime("%Y-%m-%dT%H:%M:%S"), "target": target, "tune": TUNE_COMMAND,
        "budget": opts.budget, "kernels": len(summary.items),
        "compiler_version": KernelCache(cache_dir).compiler_version}, indent=1))
    size = _size_mb(out)
    print(f"{out}: {size:.1f} MiB (cache {_size_mb(cache_dir):.1f}, wheels {_size_mb(wheels):.1f}); "
          f"the device call carries it: run(carry=['{out.name}'], command='bash benchmarks/gpu_check.sh')")
    return 0 if size < 60 else 1


# ---- on the GPU ------------------------------------------------------------------------------------------------

class Steps:
    """Runs each step as a child process with a time limit, keeps its log, and collects one summary line each."""

    def __init__(self, work: Path, out: Path, deadline_s: float) -> None:
        self.work, self.out = work, out
        self.logs = work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.lines: list[str] = []
        self.end = time.monotonic() + deadline_s

    def collect(self) -> None:
        """Copy what there is to --out (after every step: a call cut short still brings back what was done).
        $OUT takes at most 8 files, two folders down: the exports, the DB and one tarball of the rest."""
        for name in ("summary.txt", "gpu_sample.md", "gpu_sample.json", "gpu_path.json", "gpu.db"):
            if (self.work / name).is_file():
                shutil.copy(self.work / name, self.out / name)
        with tarfile.open(self.out / "logs.tar.gz", "w:gz") as tar:
            tar.add(self.logs, arcname="logs")
            for extra in ("tune", "devices.csv"):
                if (self.work / extra).exists():
                    tar.add(self.work / extra, arcname=extra)

    def run(self, name: str, argv: list[str], timeout_s: float, ok_codes: tuple[int, ...] = (0,),
            env: dict[str, str] | None = None, expect: str | None = None) -> tuple[int, str]:
        """`expect`: a text the output must hold for the step to be ok (the reason of an expected failure)."""
        t0 = time.monotonic()
        timeout_s = min(timeout_s, self.end - t0)
        if timeout_s < 10:
            self.lines.append(f"BAD {name:<14} skipped: the check's deadline")
            return 125, ""
        print(f"== {name}: {' '.join(argv[3:] if argv[:3] == BOO else argv)[:300]}", flush=True)
        # past its time a step gets SIGABRT first: with PYTHONFAULTHANDLER set it prints every thread's stack (where
        # it was stuck) before it dies; both streams are kept (a tune reports its progress on stderr)
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
                             env={**os.environ, "PYTHONFAULTHANDLER": "1", **(env or {})})
        try:
            text, _ = p.communicate(timeout=timeout_s)
            code = p.returncode
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGABRT)
            try:
                text, _ = p.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                text, _ = p.communicate()
            code = 124
            text = (text or "") + f"\n[timed out after {timeout_s:.0f} s: SIGABRT, the stacks above]"
        (self.logs / f"{name}.log").write_text(text)
        secs = time.monotonic() - t0
        mark = "ok " if code in ok_codes and (expect is None or expect in text) else "BAD"
        self.lines.append(f"{mark} {name:<14} exit {code:<3} {secs:6.1f} s")
        print("\n".join(text.splitlines()[-25:]), flush=True)
        print(f"-- {name}: exit {code} in {secs:.1f} s", flush=True)
        (self.work / "summary.txt").write_text("\n".join(self.lines) + "\n")
        self.collect()
        return code, text


def _env_report() -> str:
    out = []
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,"
                              "temperature.gpu,power.draw", "--format=csv"], capture_output=True, text=True,
                             timeout=30)
        out.append(smi.stdout.strip())
    except (OSError, subprocess.TimeoutExpired) as e:
        out.append(f"nvidia-smi: {e}")
    import importlib.util

    out.append(f"python {sys.version.split()[0]}")
    try:
        importable = importlib.util.find_spec("iree.compiler") is not None
    except ImportError:
        importable = False
    out.append(f"iree.compiler importable: {importable}")
    from boo_engine.iree_tools import compiler_here

    out.append(f"iree-compile here: {compiler_here()}")
    import iree.runtime as rt

    out.append(f"iree runtime drivers: {rt.query_available_drivers()}")
    import torch

    out.append(f"torch {torch.__version__} cuda {torch.version.cuda} available {torch.cuda.is_available()} "
               f"{torch.cuda.get_device_name(0) if torch.cuda.is_available() else ''}")
    from boo_engine.targets import default_target

    t = default_target()
    out.append(f"default target {t.name} runs_on {t.runs_on} notice {t.notice}")
    return "\n".join(out)


def monitor(opts: argparse.Namespace) -> int:
    """The GPU monitor on a long load: torch's f16 8192^3 gemm for --seconds (the heaviest load at hand: the
    power cap, if anything, shows here), then IREE's f16 4096^3 gemm measured by the worker for --seconds, whose
    result carries the state as every GPU result does. Prints both summaries as JSON."""
    import torch

    from boo_engine.bench.gpu_timing import GpuMonitor
    from boo_engine.bench.worker import BenchSpec, BenchWorker
    from boo_engine.commands import parse_command
    from boo_engine.compile.build import compile_signature

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    torch.cuda.synchronize()
    n, t0 = 0, time.monotonic()
    with GpuMonitor() as m:
        while time.monotonic() - t0 < opts.seconds:
            for _ in range(20):
                a @ b
            torch.cuda.synchronize()
            n += 20
    secs = time.monotonic() - t0
    torch_state = m.summary()
    del a, b
    torch.cuda.empty_cache()
    sig = parse_command(TUNE_COMMAND)
    art = compile_signature(sig, f"cuda:{opts.arch}")
    with BenchWorker() as w:
        o = w.run(BenchSpec("gpu", "iree", sig, target_name=f"cuda:{opts.arch}", vmfb_path=str(art.vmfb_path),
                            driver="cuda", iters=20, min_time_s=opts.seconds, max_time_s=4 * opts.seconds,
                            device_timing=True))
    report = {"torch_gemm_8192_f16": {"calls": n, "seconds": secs, "tflops": 2 * 8192**3 * n / secs / 1e12,
                                      "gpu_state": torch_state},
              "iree_gemm_4096_f16": {"samples": len(o.samples_us), "throttled": o.throttled,
                                     "device_us": o.device_us, "device_detail": o.device_detail}}
    print(json.dumps(report, indent=1, default=str))
    return 0


def run(opts: argparse.Namespace) -> int:
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    # a fresh private folder unless one is named, which must not exist yet (never cleared: it may be a link)
    work = Path(opts.work) if opts.work else Path(tempfile.mkdtemp(prefix="boo-gpu-check-"))
    work.mkdir(parents=True, exist_ok=opts.work is None)
    steps = Steps(work, out, opts.deadline)
    db = work / "gpu.db"
    target = f"cuda:{opts.arch}"
    env_text = _env_report()
    print(env_text, flush=True)
    (steps.logs / "env.log").write_text(env_text)
    common = ["--target", target, "--db", str(db)]
    want = set(opts.steps.split(","))
    tune_out = work / "tune"
    if "tune" in want:
        code, _ = steps.run("tune", [*BOO, "tune", TUNE_COMMAND, *common, "--budget", str(opts.budget),
                                     "--batch", str(opts.budget), "--out", str(tune_out)],
                            timeout_s=opts.tune_timeout)
        if code == 0 and (tune_out / "tuned.toml").is_file():   # the verified ratio: a fresh process
            steps.run("tune-verify", [*BOO, TUNE_COMMAND, *common, "--variants-file", str(tune_out / "tuned.toml"),
                                      "--export", str(tune_out / "verify.md")], timeout_s=90)
    if "path" in want:
        steps.run("path", [sys.executable, str(REPO / "benchmarks" / "bench_gpu_path.py"), "--rounds", "3",
                           "--min-time", "0.3", "--json", str(work / "gpu_path.json")],
                  timeout_s=180, ok_codes=(0, 1))
    if "sample" in want:
        steps.run("sample", [*BOO, str(COMMANDS), *common, "--rounds", "2", "--min-time", "0.2",
                             "--export", str(work / "gpu_sample.md"), "--export", str(work / "gpu_sample.json")],
                  timeout_s=opts.step_timeout)
    if "monitor" in want:
        steps.run("monitor", [sys.executable, str(Path(__file__).resolve()), "monitor", "--arch", opts.arch],
                  timeout_s=60)
    if "devices" in want:
        two = [ln for ln in COMMANDS.read_text().splitlines() if ln.startswith("gemm")][:2]
        steps.run("devices-all", [*BOO, *two, *common, "--devices", "all", "--no-numerics",
                                  "--export", str(work / "devices.csv")], timeout_s=60)
        steps.run("devices-0,1", [*BOO, *two, *common, "--devices", "0,1", "--export",
                                  str(work / "devices01.csv")], timeout_s=30, ok_codes=(2,), expect="--devices")
    summary = "\n".join([env_text, "", *steps.lines])
    (work / "summary.txt").write_text(summary + "\n")
    print("\n" + summary, flush=True)
    steps.collect()
    return 0 if all(ln.startswith("ok") for ln in steps.lines) else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="here: compile for the GPU, tune offline, fetch the wheels")
    p.add_argument("--dir", default=str(REPO / ".gpu"))
    p.add_argument("--arch", default=ARCH)
    p.add_argument("--budget", type=int, default=TUNE_BUDGET)
    p.add_argument("--no-wheels", action="store_true")
    r = sub.add_parser("run", help="on the GPU: measure with the carried cache")
    r.add_argument("--out", required=True)
    r.add_argument("--work", default=None, help="working folder (default: a fresh temporary one)")
    r.add_argument("--arch", default=ARCH)
    r.add_argument("--budget", type=int, default=TUNE_BUDGET)
    r.add_argument("--step-timeout", type=float, default=200.0)
    # on the H200 a tune's candidate cost ~10 s beyond its measuring (each new kernel's sm_80 PTX JIT-compiled by the
    # driver when it loads, its first call, its numerics): 12 candidates did not finish their screening in 130 s
    r.add_argument("--tune-timeout", type=float, default=330.0)
    r.add_argument("--steps", default=STEPS, help=f"comma-separated, of {STEPS}")
    r.add_argument("--deadline", type=float, default=560.0, metavar="S", help="no step starts or runs past S s")
    m = sub.add_parser("monitor", help="on the GPU: the GPU monitor on a long load")
    m.add_argument("--arch", default=ARCH)
    m.add_argument("--seconds", type=float, default=6.0)
    opts = ap.parse_args()
    try:
        return {"prepare": prepare, "run": run, "monitor": monitor}[opts.cmd](opts)
    except KeyboardInterrupt:   # what is done stays: compiled kernels in the cache, each finished step's files
        print(f"gpu_check {opts.cmd}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
