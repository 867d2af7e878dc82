"""`boo-tui model`: a model of our own end to end through the real CLI (real torch.compile with iree_boo, real IREE
kernels, a real SQLite file), with a variant, backward, numerics and the per-kernel breakdown."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

MODELS = Path(__file__).parent / "models" / "small_nets.py"
CNN = f"{MODELS}:small_cnn"


def boo_model(args, env, cwd, timeout=600):
    return subprocess.run([sys.executable, "-m", "boo_tui", "model", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def cnn_run(cli_env, tmp_path_factory):
    """One training-step measurement of the small CNN: eager, iree_boo, iree_boo with a flags variant."""
    d = tmp_path_factory.mktemp("model")
    p = boo_model([CNN, "--input", "2x3x16x16", "--backward", "--variant", "dt=--iree-opt-data-tiling",
                   "--iter", "12", "--min-time", "0.2", "--rounds", "2", "--db", str(d / "r.db"),
                   "--export", str(d / "m.json"), "--export", str(d / "m.csv")], cli_env, d)
    return p, d


def test_model_columns_numerics_and_breakdown(cnn_run):
    p, d = cnn_run
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads((d / "m.json").read_text())
    cols = {(r["variant"], r["backend"]): r for r in doc["results"]}
    assert set(cols) == {("baseline", "torch"), ("baseline", "iree"), ("dt", "iree")}
    for key, r in cols.items():
        assert r["status"] == "done" and len(r["samples_us"]) >= 12, key
        if key[1] == "iree":
            assert r["numerics"]["verdict"] == "pass", r["numerics"]
            # forward output and the gradients of the input and of every parameter were compared
            assert r["numerics"]["stats"]["compared"] >= 1 + 1 + 8
            b = r["breakdown"]
            ops = {k["op"] for k in b["kernels"]}
            assert "conv" in ops, b
            # forward convs and their backward kernels, each called once per pass
            assert sum(k["calls_per_pass"] for k in b["kernels"] if k["op"] == "conv") >= 6, b["kernels"]
            assert 0 < b["ours_us"] <= b["pass_us_mean"]
            assert b["compile_s"] > 0 and r["compile"]["seconds"] > 0   # compile reported apart from run time
    # the variant's ratio vs the baseline comes with a CI and a verdict; eager is compared too
    labels = {c["variant"] for c in doc["comparisons"]}
    assert {"dt", "torch"} <= labels
    assert all(c["verdict"] in ("faster", "slower", "same", "unclear") for c in doc["comparisons"])
    # stdout: the Markdown table and where the time goes; iree_boo ran the best known kernels (the default)
    assert "where the time goes" in p.stdout and "conv" in p.stdout
    assert "iree_boo's kernels: best" in p.stdout
    assert {k["variant"] for k in cols[("baseline", "iree")]["breakdown"]["kernels"]} == {"best"}


def test_model_run_is_stored_with_its_breakdown(cnn_run):
    p, d = cnn_run
    assert p.returncode == 0, p.stderr[-2000:]
    with sqlite3.connect(d / "r.db") as db:
        rows = db.execute("SELECT backend, breakdown, n FROM results").fetchall()
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert len(rows) == 3
    assert sum(1 for b, bd, n in rows if b == "iree" and bd and json.loads(bd)["kernels"]) == 2
    assert all(n >= 12 for _, _, n in rows)


def test_model_variant_that_does_not_compile_fails_its_column_only(cli_env, tmp_path):
    p = boo_model([CNN, "--input", "2x3x16x16", "--variant", "bad=--iree-no-such-flag", "--iter", "6",
                   "--min-time", "0.05", "--rounds", "1", "--db", str(tmp_path / "r.db"),
                   "--export", str(tmp_path / "m.json")], cli_env, tmp_path)
    assert p.returncode == 1, p.stderr[-2000:]
    doc = json.loads((tmp_path / "m.json").read_text())
    by = {(r["variant"], r["backend"]): r for r in doc["results"]}
    assert by[("baseline", "iree")]["status"] == "done" and by[("baseline", "torch")]["status"] == "done"
    bad = by[("bad", "iree")]
    assert bad["status"] == "failed"
    # one line naming the op and the kernel
    assert "\n" not in bad["error"] and "conv" in bad["error"], bad["error"]


def test_model_kernels_boo_runs_boos_own_kernels(cli_env, tmp_path):
    """--kernels boo: the iree_boo column runs each kernel as iree-turbine's BOO builds it; numerics still checked."""
    p = boo_model([CNN, "--input", "2x3x16x16", "--kernels", "boo", "--iter", "6", "--min-time", "0.05", "--rounds",
                   "1", "--db", str(tmp_path / "r.db"), "--export", str(tmp_path / "m.json")], cli_env, tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "iree_boo's kernels: boo, each kernel as iree-turbine's BOO builds it" in p.stdout
    doc = json.loads((tmp_path / "m.json").read_text())
    (iree,) = [r for r in doc["results"] if r["backend"] == "iree"]
    assert iree["status"] == "done" and iree["numerics"]["verdict"] == "pass"
    assert {k["variant"] for k in iree["breakdown"]["kernels"]} == {"baseline"}


@pytest.mark.parametrize("args, needle", [
    (["nosuchfile.py:make", "--input", "2x3"], "does not exist"),
    ([CNN, "--input", "2x3x16x16:float128"], "unknown dtype"),
    ([CNN, "--input", "2x3x16x16", "--iter", "0"], "--iter 0"),
    ([f"{MODELS}:no_such_factory", "--input", "2x3x16x16"], "no callable"),
    ([CNN, "--input", "2x5x16x16"], "eager pass failed"),
])
def test_model_bad_input_is_one_line_exit_2(cli_env, tmp_path, args, needle):
    p = boo_model([*args, "--db", str(tmp_path / "r.db")], cli_env, tmp_path, timeout=300)
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert needle in lines[-1], p.stderr    # progress lines may come first; the error is one line, the last
    assert "Traceback" not in p.stderr


def test_model_help_lists_the_options(cli_env, tmp_path):
    p = boo_model(["--help"], cli_env, tmp_path, timeout=120)
    assert p.returncode == 0
    for opt in ("--input", "--backward", "--variant", "--kernels", "--export", "--rounds", "--threads"):
        assert opt in p.stdout



def test_dashboard_shows_a_model_row_with_its_breakdown(cnn_run):
    """The stored model run in the dashboard's saved-run screen: a row per column, the iree_boo row's detail pane
    saying where a pass's time goes (the real Textual app, driven by its pilot)."""
    import asyncio
    import io

    from rich.console import Console
    from textual.app import App
    from textual.widgets import Static
    from tui_pilot import wait_until

    from boo_engine.store import Store
    from boo_tui.screens import RunScreen

    p, d = cnn_run
    assert p.returncode == 0, p.stderr[-2000:]
    store = Store(str(d / "r.db"))
    run_id = store.last_run_id()

    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(RunScreen(store, run_id))

    def detail_text() -> str:
        console = Console(width=160, record=True, file=io.StringIO())
        console.print(app_ref[0].screen.query_one("#run-detail", Static).content)
        return console.export_text()

    app_ref: list = []

    async def drive() -> str:
        app = Host()
        app_ref.append(app)
        async with app.run_test(size=(160, 60)) as pilot:
            await wait_until(pilot, lambda: isinstance(app.screen, RunScreen) and len(app.screen.results) == 3, 30,
                             "the saved model run")
            screen = app.screen
            row = next(i for i, r in enumerate(screen.results) if r.backend == "iree" and r.variant == "baseline")
            table = screen.query_one("#run-results")
            table.move_cursor(row=row)
            await wait_until(pilot, lambda: "where the time goes" in detail_text(), 30, "the breakdown")
            return detail_text()

    try:
        text = asyncio.run(drive())
    finally:
        store.close()
    assert "our kernels" in text and "conv" in text



ZERO_GRAD = Path(__file__).parent / "models" / "zero_grad_nets.py"


@pytest.mark.parametrize("factory, verdict, needle", [
    # a conv bias before a training-mode batch norm and a linear before a softmax summed into the loss: gradients
    # zero in exact arithmetic, ~1e-8 noise on both sides (relative L2 error ~1 against 1e-4: a false alarm before)
    ("make", "pass", None),
    # iree_boo's column only: the conv output's gradient x1.02 / 1e-4 added to the (exactly zero) bias gradient
    ("wrong_scale", "fail", "grad of conv.weight: rel L2 err 0.02 > 0.0001"),
    ("wrong_bias", "fail", "grad of conv.bias: at rounding level"),
])
def test_model_numerics_judge_zero_gradients_by_their_rounding_floor(cli_env, tmp_path, factory, verdict, needle):
    p = boo_model([f"{ZERO_GRAD}:{factory}", "--input", "2x3x16x16", "--backward", "--iter", "3", "--min-time",
                   "0.02", "--rounds", "1", "--db", str(tmp_path / "r.db"), "--export", str(tmp_path / "m.json")],
                  cli_env, tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads((tmp_path / "m.json").read_text())
    num = next(r["numerics"] for r in doc["results"] if r["backend"] == "iree")
    assert num["verdict"] == verdict, num["stats"]
    stats = num["stats"]
    if verdict == "pass":
        notes = stats["at_rounding_level"]
        assert {"grad of conv.bias", "grad of attn.weight", "grad of attn.bias"} <= set(notes), notes
        assert "zero in exact arithmetic (both sides at rounding level" in notes["grad of conv.bias"]
        assert stats["rel_l2_err"]["grad of conv.bias"] > 1e-2       # what failed the check before
        assert "numerics **fail**" not in p.stdout
    else:
        assert needle in stats["reason"], stats["reason"]
        assert "numerics **fail**" in p.stdout
