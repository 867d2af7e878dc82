"""The iree_boo / iree_boo_inductor torch.compile backends on real IREE kernels: outputs and gradients match
eager, our kernels are the ones called (and compiled into the test's cache), unfused ops fall back, a variant
reaches the kernels, and the entry points work in a fresh interpreter."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from boo_engine.compile import cache as cache_mod
from boo_engine.errors import CommandError
from boo_engine.nn import backend, iree_boo, iree_boo_inductor, kernels, record_calls
from boo_engine.ops.conv import ConvSignature

TOL = dict(rtol=1e-4, atol=1e-5)


class Net(torch.nn.Module):
    """conv+bias+relu, conv+sigmoid (strided, no bias), a transposed conv (not fused), layer norm, linear, gelu."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.c2 = torch.nn.Conv2d(4, 4, 3, stride=2, bias=False)
        self.ct = torch.nn.ConvTranspose2d(4, 4, 2)
        self.ln = torch.nn.LayerNorm(36)
        self.fc = torch.nn.Linear(36, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.sigmoid(self.c2(torch.relu(self.c1(x))))
        y = self.ct(y)[:, :, :3, :3]
        return torch.nn.functional.gelu(self.fc(self.ln(y.flatten(1))))


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    """Every kernel of this module compiles into a cache of its own (BOO_CACHE_DIR), loaded afresh."""
    d = tmp_path_factory.mktemp("nn-backend-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BOO_CACHE_DIR", str(d))
        mp.setattr(cache_mod, "_default", None)
        kernels.clear_launchables()
        yield d
        kernels.clear_launchables()


def _eager_step(model, x):
    x = x.detach().clone().requires_grad_(True)
    model.zero_grad()
    y = model(x)
    y.sum().backward()
    return y.detach(), x.grad, [p.grad.clone() for p in model.parameters()]


@pytest.fixture(scope="module")
def trained(cache_dir):
    """One training step of Net under iree_boo (nested eager), and eager's: (backend, compiled, eager) results."""
    torch.manual_seed(0)
    model, x = Net(), torch.randn(2, 3, 8, 8)
    be = backend("eager")
    compiled = torch.compile(model, backend=be, dynamic=False)
    ours = _eager_step(compiled, x)
    return be, model, x, ours, _eager_step(model, x)


def test_training_outputs_and_gradients_match_eager(trained):
    _, _, _, (y, gx, grads), (y_ref, gx_ref, grads_ref) = trained
    torch.testing.assert_close(y, y_ref, **TOL)
    torch.testing.assert_close(gx, gx_ref, **TOL)
    for g, g_ref in zip(grads, grads_ref):
        torch.testing.assert_close(g, g_ref, **TOL)


def test_our_kernels_run_the_fused_ops(trained, cache_dir):
    be = trained[0]
    names = [s.func_name for s in be.kernels]
    assert any(n.startswith("conv_2d_float32_forward_b_") and n.endswith("_relu") for n in names), names
    assert any(n.startswith("conv_2d_float32_forward_") and n.endswith("_sigmoid") for n in names), names
    assert any(n.startswith("conv_2d_float32_all_backward") for n in names), names
    assert any(n.startswith("layer_norm_1d_float32_forward") for n in names), names
    assert any(n.startswith("layer_norm_1d_float32_all_backward") for n in names), names
    assert any(n.startswith("aten_addmm_float32") for n in names), names
    assert be.compile_s > 0
    for call in be.calls:      # compiled into the test's cache
        assert Path(call.launch.artifact.vmfb_path).is_relative_to(cache_dir), call.launch.artifact.vmfb_path


def test_unfused_op_falls_back(trained):
    be = trained[0]
    assert ("aten.convolution", "transposed convolution") in be.fallbacks
    assert ("aten.convolution_backward", "transposed convolution") in be.fallbacks
    assert not any(s.transposed for s in be.kernels if isinstance(s, ConvSignature))


def test_calls_are_tallied(trained):
    be, model, x = trained[:3]
    compiled = torch.compile(model, backend=be, dynamic=False)
    with record_calls() as log:
        compiled(x)
    called = {name for name, _ in log.tallies}
    assert any(n.endswith("_relu") for n in called) and any(n.startswith("aten_addmm") for n in called), called
    assert all(t.calls == 1 and t.total_ns > 0 for t in log.tallies.values())


def test_inductor_matches_eager(trained):
    _, model, x, _, (y_ref, gx_ref, grads_ref) = trained
    be = backend("inductor")
    y, gx, grads = _eager_step(torch.compile(model, backend=be, dynamic=False), x)
    torch.testing.assert_close(y, y_ref, **TOL)
    torch.testing.assert_close(gx, gx_ref, **TOL)
    for g, g_ref in zip(grads, grads_ref):
        torch.testing.assert_close(g, g_ref, **TOL)
    assert any(s.func_name.endswith("_relu") for s in be.kernels)
    assert any(s.func_name.startswith("layer_norm_1d_float32_all_backward") for s in be.kernels)


def test_inference_under_no_grad(trained):
    _, model, x, _, (y_ref, _, _) = trained
    be = backend("eager")
    with torch.no_grad():
        y = torch.compile(model, backend=be, dynamic=False)(x)
    torch.testing.assert_close(y, y_ref, **TOL)
    assert all(s.is_forward for s in be.kernels if hasattr(s, "is_forward"))
    assert any(s.func_name.endswith("_relu") for s in be.kernels)


def test_fusions_limit_what_is_ours(trained):
    _, model, x, _, (y_ref, _, _) = trained
    be = backend("eager", fusions=["aten.native_layer_norm"])
    with torch.no_grad():
        y = torch.compile(model, backend=be, dynamic=False)(x)
    torch.testing.assert_close(y, y_ref, **TOL)
    assert {s.op for s in be.kernels} == {"layernorm"}
    assert any(str(f[0]) == "aten.convolution" and "not in fusions" in str(f[1]) for f in be.fallbacks), be.fallbacks


def test_module_level_backends():
    assert iree_boo.nested_backend == "eager" and iree_boo_inductor.nested_backend == "inductor"


def test_variant_reaches_the_kernels(cache_dir):
    torch.manual_seed(1)
    conv, x = torch.nn.Conv2d(3, 4, 3, padding=1), torch.randn(2, 3, 8, 8)

    def f(t):
        return torch.relu(conv(t))

    with torch.no_grad():
        base, flagged = backend("eager"), backend("eager", variant="noce=--iree-opt-const-eval=false")
        boo = backend("eager", kernels="boo")
        y0 = torch.compile(f, backend=base, dynamic=False)(x)
        torch._dynamo.reset()
        y1 = torch.compile(f, backend=flagged, dynamic=False)(x)
        torch._dynamo.reset()
        y2 = torch.compile(f, backend=boo, dynamic=False)(x)
    torch.testing.assert_close(y1, y0, **TOL)
    torch.testing.assert_close(y2, y0, **TOL)
    (c0,), (c1,), (c2,) = base.calls, flagged.calls, boo.calls
    # by default the best known kernel; kernels="boo": BOO's build (a fused conv+relu is not BOO's: our export
    # with BOO's flags, as its meta says)
    assert c0.sig == c1.sig and c0.variant_name == "best" and c1.variant_name == "noce" and c2.variant_name == "boo"
    assert c2.launch.artifact.meta["build"].startswith("boo: our export") and "--iree-opt-level=O1" in \
        c2.launch.artifact.command
    assert "--iree-opt-const-eval=false" in c1.launch.artifact.command
    assert "--iree-opt-const-eval=false" not in c0.launch.artifact.command
    assert c0.launch.artifact.vmfb_path != c1.launch.artifact.vmfb_path


def test_a_layer_norm_in_a_compiled_model_gets_boos_own_kernel(cache_dir):
    """The best known layer norm forward is BOO's build (one dispatch). Its export runs inside torch.compile's
    backend here, where turbine's strict export and the running Dynamo do not mix ("Cannot clear callbacks while 1
    are pending", or a crash): it runs in a child process, and the kernel is turbine's, with right numerics."""
    torch.manual_seed(0)
    norm, x = torch.nn.LayerNorm(32), torch.randn(2, 4, 32)
    be = backend("eager")
    try:
        with torch.no_grad():
            y = torch.compile(norm, backend=be, dynamic=False)(x)
            torch.testing.assert_close(y, norm(x), **TOL)
    finally:
        torch._dynamo.reset()   # Dynamo's per-code-object state (automatic dynamic shapes) must not reach others
    (call,) = be.calls
    assert call.variant_name == "best" and call.launch.artifact.meta["build"].startswith("boo: iree-turbine")


def test_conv_activation_signature():
    common = ("float32", 2, 3, 4, (8, 8), (3, 3), (1, 1), (1, 1), (1, 1))
    plain, relu = ConvSignature(*common), ConvSignature(*common, activation="relu")
    assert plain.func_name == "conv_2d_float32_forward_2x3x8x8_nchw_4x3x3x3_fchw_nfhw_1x1s_1x1p_1x1d_1g"
    assert relu.func_name == plain.func_name + "_relu" and "relu" in relu.shape_label
    assert "activation" not in plain.describe() and relu.describe()["activation"] == "relu"
    x, w = relu.get_sample_args()
    torch.testing.assert_close(relu.reference(x, w), torch.relu(plain.reference(x, w)))
    torch.testing.assert_close(ConvSignature(*common, activation="sigmoid").formulated("matmul", x, w),
                               torch.sigmoid(plain.reference(x, w)), **TOL)
    with pytest.raises(CommandError, match="unknown activation 'gelu'"):
        ConvSignature(*common, activation="gelu")
    with pytest.raises(CommandError, match="forward conv only"):
        ConvSignature(*common, forw=2, activation="relu")


def _entry_point_python() -> str | None:
    """A Python whose installed boo-tui declares the torch_dynamo_backends entry points, or None."""
    for py in (sys.executable,):
        code = "from importlib.metadata import entry_points as e; print(sorted(e(group='torch_dynamo_backends').names))"
        out = subprocess.run([py, "-c", code], capture_output=True, text=True, cwd="/")
        if "iree_boo" in out.stdout:
            return py
    return None


def test_entry_point_in_fresh_interpreter(tmp_path):
    py = _entry_point_python()
    if py is None:
        pytest.skip("boo-tui's torch_dynamo_backends entry points are not installed in any Python here "
                    "(pip install -e . to install them)")
    code = textwrap.dedent("""
        import sys, torch
        m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU())
        x = torch.randn(1, 3, 6, 6)
        with torch.no_grad():
            y = torch.compile(m, backend='iree_boo', dynamic=False)(x)
            torch.testing.assert_close(y, m(x), rtol=1e-4, atol=1e-5)
        assert 'boo_engine.nn.backend' in sys.modules
        from boo_engine.nn import iree_boo
        print('kernels', [s.func_name for s in iree_boo.kernels])
    """)
    env = dict(os.environ, BOO_CACHE_DIR=str(tmp_path))
    out = subprocess.run([py, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "_relu" in out.stdout


def test_entry_points_declared():
    """What the installed package must declare (checked against pyproject, so a typo fails without an install)."""
    import tomllib

    pyproject = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
    eps = pyproject["project"]["entry-points"]["torch_dynamo_backends"]
    assert eps == {"iree_boo": "boo_engine.nn.backend:iree_boo",
                   "iree_boo_inductor": "boo_engine.nn.backend:iree_boo_inductor"}


class BnNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.c(x)))


def test_batch_norm_training_and_eval_run_our_kernels(cache_dir):
    """Training: outputs, every gradient and the updated running statistics as eager's; eval: the inference
    kernel. Both with our batch-norm kernels, none left to the nested backend."""
    torch.manual_seed(0)
    ref, ours = BnNet(), BnNet()
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(2, 3, 8, 8)
    be = backend("eager")
    y = torch.compile(ours, backend=be, dynamic=False)(x)
    y.sum().backward()
    y_ref = ref(x)
    y_ref.sum().backward()
    torch.testing.assert_close(y, y_ref, **TOL)
    for (name, p), p_ref in zip(ours.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, p_ref.grad, **TOL, msg=name)
    torch.testing.assert_close(ours.bn.running_mean, ref.bn.running_mean, **TOL)
    torch.testing.assert_close(ours.bn.running_var, ref.bn.running_var, **TOL)
    modes = {s.mode for s in be.kernels if s.op == "bnorm"}
    assert modes == {"forward_training", "backward"}, be.kernels
    assert not [f for f in be.fallbacks if "batch_norm" in str(f[0])], be.fallbacks

    ref.eval()
    ours.eval()
    be = backend("eager")
    with torch.no_grad():
        y = torch.compile(ours, backend=be, dynamic=False)(x)
        torch.testing.assert_close(y, ref(x), **TOL)
    assert {s.mode for s in be.kernels if s.op == "bnorm"} == {"forward_inference"}


def test_dynamic_shapes_fall_back_never_run_a_static_kernel(cache_dir):
    """A graph with symbolic sizes (dynamic=True, or Dynamo's automatic dynamic shapes when a second batch size
    arrives) must not bind our per-shape kernels: the ops fall back, the outputs stay right for every size."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(144, 5)).eval()
    be = backend("eager")
    compiled = torch.compile(model, backend=be, dynamic=True)
    with torch.no_grad():
        for n in (2, 3, 5):
            x = torch.randn(n, 3, 6, 6)
            torch.testing.assert_close(compiled(x), model(x), **TOL)
    assert not be.kernels
    assert any("dynamic shapes" in str(f[1]) for f in be.fallbacks), be.fallbacks

    be = backend("eager")
    compiled = torch.compile(model, backend=be)      # dynamic=None: static first, dynamic after a recompile
    with torch.no_grad():
        for n in (2, 3, 5):
            x = torch.randn(n, 3, 6, 6)
            torch.testing.assert_close(compiled(x), model(x), **TOL)
    assert len(be.kernels) == 2     # conv+relu and addmm of the first, static graph only
