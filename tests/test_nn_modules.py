"""BooConv1d/2d/3d, BooLayerNorm, BooLinear and replace_*_with_boo on real IREE kernels: drop-in for the torch
modules (constructor, parameters, state_dict, results, gradients). Shapes mostly repeat test_nn_functional's, so
their kernels are compiled once per session (same private cache, same in-memory launchables)."""
from __future__ import annotations

import pytest
import torch
from nn_support import close, private_kernel_cache
from torch import nn

from boo_engine.nn import (
    BooConv1d,
    BooConv2d,
    BooLayerNorm,
    BooLinear,
    BooNNError,
    record_calls,
    replace_convs_with_boo,
    replace_with_boo,
)


@pytest.fixture(scope="module", autouse=True)
def _kernel_cache(tmp_path_factory):
    with private_kernel_cache(tmp_path_factory.getbasetemp() / "nn-kernels"):
        yield


GEOMETRY = {"stride": (1, 2), "padding": (1, 0), "dilation": (2, 1)}


def _x(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).requires_grad_()


def _run(model, x):
    """Output and the grads of (x, every parameter) for a fixed upstream gradient."""
    y = model(x)
    dy = torch.randn(y.shape, generator=torch.Generator().manual_seed(1))
    return y, torch.autograd.grad(y, (x, *model.parameters()), dy)


def _same_results(boo, ref, x, tol=1e-4):
    y, grads = _run(boo, x)
    ry, rgrads = _run(ref, x)
    close(y, ry, tol)
    assert len(grads) == len(rgrads)
    for g, r in zip(grads, rgrads):
        close(g, r, tol)


def test_state_dict_round_trip_between_torch_and_boo_conv():
    torch.manual_seed(0)
    ref = nn.Conv2d(4, 6, (3, 2), **GEOMETRY)
    boo = BooConv2d(4, 6, (3, 2), **GEOMETRY)
    assert boo.state_dict().keys() == ref.state_dict().keys()
    boo.load_state_dict(ref.state_dict())
    back = nn.Conv2d(4, 6, (3, 2), **GEOMETRY)
    back.load_state_dict(boo.state_dict())
    assert torch.equal(back.weight, ref.weight) and torch.equal(back.bias, ref.bias)
    assert isinstance(boo, nn.Conv2d)
    _same_results(boo, ref, _x(2, 4, 7, 6))


def test_module_variant_is_used_for_its_kernels():
    boo = BooConv2d(4, 6, (3, 2), **GEOMETRY, variant="mm=formulation=matmul")
    with record_calls() as log:
        _run(boo, _x(2, 4, 7, 6))
    assert {t.variant for t in log.tallies.values()} == {"mm"}
    assert "variant='mm=formulation=matmul'" in repr(boo)


@pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning")   # torch's own, about its copy
def test_same_padding_and_reflect_padding_mode():
    torch.manual_seed(0)
    same = BooConv2d(4, 4, 2, groups=2, padding="same", bias=False)   # total padding 1: extra on the right
    ref = nn.Conv2d(4, 4, 2, groups=2, padding="same", bias=False)
    ref.load_state_dict(same.state_dict())
    x = _x(1, 4, 6, 6)
    with torch.no_grad():
        close(same(x), ref(x))
    reflect = BooConv2d(4, 4, 3, groups=2, padding=1, padding_mode="reflect")
    ref = nn.Conv2d(4, 4, 3, groups=2, padding=1, padding_mode="reflect")
    ref.load_state_dict(reflect.state_dict())
    with torch.no_grad():
        close(reflect(x), ref(x))


def test_unbatched_conv1d_input():
    torch.manual_seed(0)
    boo, ref = BooConv1d(3, 4, 3, stride=2, bias=False), nn.Conv1d(3, 4, 3, stride=2, bias=False)
    ref.load_state_dict(boo.state_dict())
    x = _x(3, 9)
    with torch.no_grad():
        y = boo(x)
    assert y.shape == (4, 4)
    close(y, ref(x))


def test_replace_convs_with_boo_shares_parameters_and_keeps_results():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(4, 6, (3, 2), **GEOMETRY), nn.ReLU(), nn.ConvTranspose2d(6, 4, 1))
    ref = nn.Sequential(nn.Conv2d(4, 6, (3, 2), **GEOMETRY), nn.ReLU(), nn.ConvTranspose2d(6, 4, 1))
    ref.load_state_dict(model.state_dict())
    params = list(model.parameters())
    assert replace_convs_with_boo(model) is model
    assert type(model[0]) is BooConv2d and type(model[2]) is nn.ConvTranspose2d
    assert all(a is b for a, b in zip(model.parameters(), params)) and len(list(model.parameters())) == len(params)
    _same_results(model, ref, _x(2, 4, 7, 6))


def test_replace_with_boo_swaps_linear_and_layer_norm():
    torch.manual_seed(0)
    lin = nn.Sequential(nn.Linear(8, 5))
    ref_lin = nn.Sequential(nn.Linear(8, 5))
    ref_lin.load_state_dict(lin.state_dict())
    weight = lin[0].weight
    replace_with_boo(lin)
    assert type(lin[0]) is BooLinear and lin[0].weight is weight
    _same_results(lin, ref_lin, _x(2, 3, 8))
    ln = nn.LayerNorm((4, 8))
    with torch.no_grad():
        ln.weight.normal_()
        ln.bias.normal_()
    boo_ln = replace_with_boo(ln)     # a root module comes back replaced
    assert type(boo_ln) is BooLayerNorm and boo_ln.weight is ln.weight and boo_ln.bias is ln.bias
    _same_results(boo_ln, ln, _x(3, 4, 8))


def test_replace_with_boo_respects_its_switches():
    model = nn.Sequential(nn.Conv1d(3, 4, 3), nn.LayerNorm(4), nn.Linear(4, 2))
    replace_with_boo(model, convs=False, linears=False)
    assert [type(m) for m in model] == [nn.Conv1d, BooLayerNorm, nn.Linear]


def test_unsupported_dtype_in_a_module_is_one_line():
    with pytest.raises(BooNNError, match="dtype float64"):
        BooLinear(4, 2).double()(torch.zeros(1, 4, dtype=torch.float64))
