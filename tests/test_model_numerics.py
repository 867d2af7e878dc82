"""The model check's criterion (modelbench/judge.py) on real tensors: the gradients of tests/models/zero_grad_nets.py
that are zero in exact arithmetic (a conv bias before a training-mode batch norm, a linear before a softmax summed
into the loss) computed by two correct float32 implementations (eager, and eager in channels_last: other kernels,
other summation orders) pass, where a relative L2 error read O(1) against 1e-4; a wrong gradient still fails.
Only eager torch runs here (fast); tests/test_model_cli.py runs the same through iree_boo."""
from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import pytest
import torch

from boo_engine.modelbench.bench import _one_pass, _snapshot
from boo_engine.modelbench.judge import compare_tensors, copy_for_reference, rounding_reference

MODELS = Path(__file__).parent / "models" / "zero_grad_nets.py"
ZERO = ("grad of conv.bias", "grad of attn.weight", "grad of attn.bias")


def _load(name: str):
    spec = importlib.util.spec_from_file_location("zero_grad_nets", MODELS)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, name)()


def _snap(model, x):
    named = list(model.named_parameters())
    return _snapshot(_one_pass(model, [x], [p for _, p in named], True)(), [x], named, True)


@pytest.fixture(scope="module")
def two_correct_runs():
    """(eager's tensors, channels_last's tensors, the rounding reference), all of the same model and input."""
    model = _load("make")
    model64 = copy_for_reference(model)
    other = copy.deepcopy(model).to(memory_format=torch.channels_last)
    torch.manual_seed(0)
    x = torch.randn(2, 3, 16, 16).requires_grad_(True)
    rng = torch.random.get_rng_state()
    eager = _snap(model, x)
    rounding = rounding_reference(model64, [x], [n for n, _ in model.named_parameters()], True, eager, rng)
    got = _snap(other, x.detach().to(memory_format=torch.channels_last).requires_grad_(True))
    got = {k: v.contiguous() for k, v in got.items()}
    return eager, got, rounding


def test_zero_gradients_read_as_failures_by_relative_error_alone(two_correct_runs):
    eager, got, _ = two_correct_runs
    info = compare_tensors(eager, got)
    assert info.verdict == "fail"
    errs = info.stats["rel_l2_err"]
    assert errs["grad of conv.bias"] > 0.1 and errs["grad of attn.weight"] > 0.1, errs


def test_zero_gradients_pass_at_rounding_level_and_say_why(two_correct_runs):
    eager, got, rounding = two_correct_runs
    assert rounding.note is None
    for name in ZERO:      # exact value ~1e-16: zero in exact arithmetic; both sides hold ~1e-8 noise
        assert float(rounding.exact[name].norm()) < 1e-13 < float(eager[name].norm()), name
    info = compare_tensors(eager, got, rounding)
    assert info.verdict == "pass", info.stats
    notes = info.stats["at_rounding_level"]
    assert set(notes) == set(ZERO)
    assert notes["grad of conv.bias"].startswith("grad of conv.bias: zero in exact arithmetic (both sides at "
                                                  "rounding level"), notes
    assert "< floor" in notes["grad of conv.bias"]
    # ordinary tensors are judged by the tolerance as before, not by a floor
    assert "grad of conv.weight" not in notes and info.stats["rel_l2_err"]["grad of conv.weight"] < 1e-5


@pytest.mark.parametrize("name, wrong", [
    ("grad of conv.weight", lambda t: t * 1.01),                          # scaled by 1.01
    ("grad of conv.weight", lambda t: t.flatten().index_add(0, torch.tensor([5]), torch.tensor([1e-3])).view_as(t)),
    ("grad of bn.bias", lambda t: -t),                                    # wrong sign
    ("grad of conv.bias", lambda t: t + 1e-4),                            # a zero gradient that is not zero
    ("grad of attn.weight", lambda t: t + 1e-5 * torch.randn(t.shape, generator=torch.Generator().manual_seed(0))),
])
def test_a_wrong_gradient_still_fails(two_correct_runs, name, wrong):
    eager, got, rounding = two_correct_runs
    bad = dict(got, **{name: wrong(got[name])})
    info = compare_tensors(eager, bad, rounding)
    assert info.verdict == "fail", info.stats
    assert name in info.stats["reason"] and info.stats["worst"] == name


def test_no_float64_reference_keeps_the_tolerance_and_says_why(two_correct_runs):
    eager, got, _ = two_correct_runs
    from boo_engine.modelbench.judge import RoundingReference

    info = compare_tensors(eager, got, RoundingReference(note="no float64 reference (x): no rounding floors"))
    assert info.verdict == "fail" and "no float64 reference" in info.stats["rounding_floor"]


def test_a_float64_run_that_disagrees_with_eager_turns_the_floors_off():
    """Dropout drawing other masks in the float64 run (here: the generator in another state than eager's): float64
    is then no reference, and no floor may hide a difference."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 4))
    model64 = copy_for_reference(model)
    x = torch.randn(4, 8).requires_grad_(True)
    eager = _snap(model, x)
    other_state = torch.Generator().manual_seed(12345).get_state()
    rounding = rounding_reference(model64, [x], [n for n, _ in model.named_parameters()], True, eager, other_state)
    assert rounding.note and "no rounding floors" in rounding.note and not rounding.noise
    # with eager's generator state the float64 run draws the same masks: floors on
    torch.manual_seed(1)
    rng = torch.random.get_rng_state()
    eager = _snap(model, x)
    same = rounding_reference(model64, [x], [n for n, _ in model.named_parameters()], True, eager, rng)
    assert same.note is None and same.noise
