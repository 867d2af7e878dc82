"""--devices: the device list (parsing, one-line errors), the rule that spreads commands over devices (a free device
takes the next command; a command's jobs stay on one device), the worker's child held to its GPU, a real CPU run
through the multi-device path recording the device, and the exports carrying it. This machine has no GPU: GPU
lists are tested at the parsing and planning level with fake device counts."""
from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import pytest

from boo_engine.bench.devices import DeviceError, device_env, parse_devices
from boo_engine.boo_driver_csv import render_boo_driver_csv
from boo_engine.cli.common import UsageError, gpu_id_devices
from boo_engine.config import SessionConfig
from boo_engine.exporters import render_csv
from boo_engine.jsondoc import render_json
from boo_engine.markdown import render_markdown
from boo_engine.results import DONE, JobResult, Stats
from boo_engine.session import Session
from boo_engine.session.device_stages import command_groups, spread
from boo_engine.store import Store
from boo_engine.targets import Target

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---- parsing -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("0", ("cuda:0",)),
    ("0,1", ("cuda:0", "cuda:1")),
    ("0-3", ("cuda:0", "cuda:1", "cuda:2", "cuda:3")),
    ("2, 0", ("cuda:2", "cuda:0")),          # the order given, spaces allowed
    ("0,2-3", ("cuda:0", "cuda:2", "cuda:3")),
    ("all", ("cuda:0", "cuda:1", "cuda:2", "cuda:3")),
    ("ALL", ("cuda:0", "cuda:1", "cuda:2", "cuda:3")),
])
def test_gpu_lists_parse(text, expected):
    assert parse_devices(text, "cuda", 4) == expected


def test_hip_devices_are_named_hip():
    assert parse_devices("1", "hip", 2) == ("hip:1",)


@pytest.mark.parametrize("text, needle", [
    ("", "empty device list"),
    ("  ", "empty device list"),
    ("0,", "an empty item"),
    ("0,,1", "an empty item"),
    ("x", "'x' is not a GPU id"),
    ("0,gpu1", "'gpu1' is not a GPU id"),
    ("1.5", "'1.5' is not a GPU id"),
    ("-1", "'-1' is negative"),
    ("0,-2", "'-2' is negative"),
    ("3-1", "the range '3-1' runs backwards"),
    ("0,0", "GPU 0 is listed twice"),
    ("0-2,1", "GPU 1 is listed twice"),
    ("all,0", "'all' cannot be combined"),
    ("4", "this machine has no cuda GPU 4 (4 cuda GPUs, ids 0 to 3)"),
    ("0-7", "this machine has no cuda GPU 4"),
])
def test_bad_gpu_lists_are_one_line_errors(text, needle):
    with pytest.raises(DeviceError) as e:
        parse_devices(text, "cuda", 4)
    message = str(e.value)
    assert needle in message and "\n" not in message and message.startswith("--devices")


def test_a_machine_without_that_gpu_says_so():
    with pytest.raises(DeviceError, match="this machine has no hip GPU"):
        parse_devices("0", "hip", 0)
    with pytest.raises(DeviceError, match="this machine has no hip GPU"):
        parse_devices("all", "hip", 0)


@pytest.mark.parametrize("text", ["cpu", "CPU", "all", "0"])
def test_the_cpu_target_has_one_device(text):
    assert parse_devices(text, "cpu") == ("cpu",)


@pytest.mark.parametrize("text", ["0,1", "1", "0-3", "cuda:0"])
def test_the_cpu_target_refuses_gpu_lists(text):
    with pytest.raises(DeviceError, match="the cpu target measures on one device"):
        parse_devices(text, "cpu")


def test_gpu_id_is_devices_of_one():
    assert gpu_id_devices("0", Target("cuda", "sm_80"), runs=False) == (
        (), "--gpu-id 0 has no effect with --preload (nothing is measured)")
    with pytest.raises(UsageError, match="--gpu-id 0: the cpu target"):
        gpu_id_devices("0", Target("cpu"))
    # this machine has no GPU: what --gpu-id 0 becomes is refused the way --devices 0 is
    with pytest.raises(UsageError, match=r"^--gpu-id 1: this machine has no cuda GPU$"):
        gpu_id_devices("1", Target("cuda", "sm_80"))


# ---- the worker's child held to its device -------------------------------------------------------------------
def test_device_env_names_one_gpu():
    assert device_env("cpu", {}) == {}
    assert device_env("cuda:1", {}) == {"CUDA_VISIBLE_DEVICES": "1"}
    assert device_env("hip:0", {}) == {"HIP_VISIBLE_DEVICES": "0"}
    # ids count the GPUs this process sees: the parent's own list is indexed
    assert device_env("cuda:1", {"CUDA_VISIBLE_DEVICES": "2,3"}) == {"CUDA_VISIBLE_DEVICES": "3"}


# ---- the spreading rule (planning level) -------------------------------------------------------------------
DEVICES = ["cuda:0", "cuda:1", "cuda:2"]


def test_a_free_device_takes_the_next_command():
    units = ["a", "b", "c", "d", "e"]
    assert spread(units, DEVICES) == {"cuda:0": ["a", "d"], "cuda:1": ["b", "e"], "cuda:2": ["c"]}
    # a long first command: the other devices take the rest as they free up
    assert spread(units, DEVICES, durations=[10, 1, 1, 1, 1]) == {
        "cuda:0": ["a"], "cuda:1": ["b", "d"], "cuda:2": ["c", "e"]}
    assert spread(units, ["cpu"]) == {"cpu": units}
    with pytest.raises(ValueError):
        spread(units, [])


def test_every_job_of_a_command_lands_on_one_device():
    # job ids -> their command; one command's variants and torch reference are one unit
    command_of = {"c1/base": "conv A", "c1/tuned": "conv A", "c1/torch": "conv A",
                  "c2/base": "gemm B", "c2/torch": "gemm B",
                  "c3/base": "conv C", "c1/again": "conv A"}
    groups = command_groups(list(command_of), command_of)
    assert groups == [["c1/base", "c1/tuned", "c1/torch", "c1/again"], ["c2/base", "c2/torch"], ["c3/base"]]
    placed = spread(groups, DEVICES[:2])
    where = {job: device for device, gs in placed.items() for g in gs for job in g}
    for command in set(command_of.values()):
        assert len({where[j] for j, c in command_of.items() if c == command}) == 1, command
    assert {where["c1/base"], where["c2/base"]} == {"cuda:0", "cuda:1"}   # different commands: both devices used


# ---- a real run through the multi-device path on the CPU -------------------------------------------------------
def test_cpu_run_records_the_device(tmp_path):
    cfg = SessionConfig(target="cpu", iters=5, db_path=str(tmp_path / "r.db"), cache_dir=str(tmp_path / "cache"),
                        devices=parse_devices("cpu", "cpu"), rounds=2)
    with Session(cfg) as s:
        s.add_command("gemm --a_w 8 --a_h 8 --b_w 8")
        s.add_command("gemm --a_w 8 --a_h 16 --b_w 8")
        s.start()
        assert s.wait(timeout=300)
        results = list(s.jobs.values())
        run_id = s.run_id
    with Store(str(tmp_path / "r.db")) as store:   # after the session closed: every write flushed
        stored = store.load_results(run_id)
    assert len(results) == 4 and all(r.status == DONE for r in results), [(r.status, r.error) for r in results]
    assert {r.device for r in results} == {"cpu"}
    assert {r.device for r in stored} == {"cpu"}


# ---- exports carry the device ----------------------------------------------------------------------------------
def _result(command: str, backend: str, device: str, median: float) -> JobResult:
    return JobResult(job_id=f"{command}-{backend}", command=command, func_name="f", op="gemm", variant="baseline",
                     target="cuda:sm_80", backend=backend, status=DONE, device=device,
                     samples_us=[median] * 5, stats=Stats(n=5, min_us=median, median_us=median, mean_us=median,
                                                          max_us=median, stddev_us=0.0, p10_us=median,
                                                          p90_us=median, iqr_us=0.0))


def test_exports_carry_the_device():
    results = [_result("gemm A", "iree", "cuda:0", 10.0), _result("gemm A", "torch", "cuda:0", 12.0),
               _result("gemm B", "iree", "cuda:1", 20.0)]
    rows = list(csv.DictReader(io.StringIO(render_csv(results, {}))))
    assert [r["device"] for r in rows] == ["cuda:0", "cuda:0", "cuda:1"]
    doc = json.loads(render_json(results, environment=None, run=None, comparisons={}))
    assert [r["device"] for r in doc["results"]] == ["cuda:0", "cuda:0", "cuda:1"]
    md = render_markdown(results, comparisons={})
    assert "devices `cuda:0`, `cuda:1`" in md
    header = next(line for line in md.splitlines() if line.startswith("| command"))
    assert "| device |" in header
    assert any("`gemm B`" in line and "`cuda:1`" in line for line in md.splitlines())
    boo = list(csv.reader(io.StringIO(render_boo_driver_csv(
        [("gemm A", {"iree": results[0], "torch": results[1]}), ("gemm B", {"iree": results[2]})]))))
    at = boo[0].index("device")   # the samples' counts (`iree n`, ...) follow it
    assert [boo[1][at], boo[2][at]] == ["cuda:0", "cuda:1"]


def test_one_device_keeps_the_markdown_table_as_it_was():
    results = [_result("gemm A", "iree", "cpu", 10.0)]
    md = render_markdown(results, comparisons={})
    assert "device `cpu`" in md
    assert "| device |" not in md
    assert "device" not in next(csv.reader(io.StringIO(render_boo_driver_csv([("gemm A", {"iree": results[0]})]))))


# ---- the command lines ---------------------------------------------------------------------------------------
def _cli(module: str, args: list[str], tmp_path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=ROOT, BOO_DB=str(tmp_path / "x.db"))
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)


@pytest.mark.parametrize("args, needle", [
    (["--devices", "0,1"], "--devices '0,1': the cpu target measures on one device"),
    (["--devices", ""], "--devices: empty device list"),
    (["--devices", "0", "--target", "hip:gfx942"], "--devices '0': this machine has no hip GPU"),
    (["--devices", "0,x", "--target", "cuda:sm_80"], "'x' is not a GPU id"),
])
def test_boo_tui_refuses_bad_devices_in_one_line(tmp_path, args, needle):
    out = _cli("boo_tui.cli", ["gemm --a_w 8 --a_h 8 --b_w 8", "--headless", *args], tmp_path)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr


@pytest.mark.parametrize("args, needle", [
    (["--devices", "1"], "--devices '1': the cpu target measures on one device"),
    (["--devices", "0", "--target", "cuda:sm_80"], "--devices '0': this machine has no cuda GPU"),
    (["--devices", "0", "--gpu-id", "0", "--target", "cuda:sm_80"], "either --gpu-id or --devices"),
])
def test_boo_driver_refuses_bad_devices_in_one_line(tmp_path, args, needle):
    out = _cli("boo_engine.cli.driver", ["gemm", "--a_w", "8", "--a_h", "8", "--b_w", "8", *args], tmp_path)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr
