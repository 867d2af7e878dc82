"""`torch.compile(model, backend=iree_boo)`: our kernels for the convolutions, layer norms and matmuls of a model,
everything else left to a nested backend (eager or inductor).

How: at the aten level through aot_autograd, both the forward and the backward graph are rewritten before the
nested backend compiles them (`fusion.find_matches`): each matched node becomes one call of our kernel, compiled
(through the disk cache) while the graph compiles, never on the first run. Under eager the graph calls a bound
`KernelCall` directly (no dispatcher in between; on this project's EPYC a fused op costs ~26 us beyond the
kernel, ~10 of them the launchable's DLPack hand-over: benchmarks/bench_nn_backend.py); under inductor it
calls the opaque custom op `boo::kernel` (with a fake impl
giving the output shapes), which inductor schedules as an extern call. aten ops inductor would otherwise
decompose before we see them (native_layer_norm and its backward, addmm...) are kept out of its decomposition
table.

The variant: `backend(variant=...)` (or `backend(kernels="boo")`: BOO's own kernels), else the one in force when
the graph compiles (`kernels.current_variant()`: `use_variant`, then BOO_TUNING_SPEC_PATH, then $BOO_KERNELS'
kernels: the best known ones by default). A variant scoped to other kernels leaves a kernel at the best known one.
"""
from __future__ import annotations

import logging
import operator
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch.fx as fx
from torch._ops import OpOverload, OpOverloadPacket

from ..errors import BooError
from ..ops.base import OpSignature
from ..variants import Variant
from . import fusion
from .kernels import BooNNError, _log_var, as_variant, current_variant, kernels_variant, launchable_for, target_for

if TYPE_CHECKING:
    from torch._inductor.output_code import OutputCode

log = logging.getLogger("boo_engine.nn")

#: a compiled graph: called with the graph's inputs, returns its outputs (torch's `CompiledFn`)
CompiledFn = Callable[..., Any]
#: a torch.compile backend (torch's `CompilerFn`): a graph and its example inputs -> the compiled graph
CompilerFn = Callable[[fx.GraphModule, list[torch.Tensor]], CompiledFn]

#: a kernel call behind the custom op, by key (the custom op's string argument)
_REGISTRY: dict[str, KernelCall] = {}


class KernelCall:
    """One compiled kernel bound into a graph: `call(*tensors)` returns the kernel's outputs as a list.

    The per-call path: permute the operands read in place, detach (a parameter still requires grad inside the
    compiled forward, and DLPack refuses such a tensor), make contiguous (inductor may hand over another layout),
    call the kernel, tally when `record_calls()` is on, move the results to the tensors' device."""

    def __init__(self, match: fusion.Match, variant: Variant, device: torch.device) -> None:
        self.sig = match.sig
        self.aten = match.aten
        t0 = time.perf_counter()
        try:
            self.launch, used = launchable_for(match.sig, target_for(device), variant)
        except BooError as e:
            first = (str(e).splitlines() or [type(e).__name__])[0]
            raise BooNNError(f"{match.aten}: kernel {match.sig.func_name} failed to compile: {first}") from None
        self.compile_s = time.perf_counter() - t0
        self.variant_name = used.name
        # the custom op finds the call by this key: two variants may share a name (two "tuned" files), never a
        # content digest
        self.key = f"{used.name}:{used.key_material()[:16]}:{match.sig.func_name}"
        self.perms = match.perms if any(p is not None for p in match.perms) else None
        # shapes and dtypes are the graph's (static, guarded by dynamo): on a CPU driver the bound call skips the
        # launchable's per-argument checks (7 us of its 23 us per call on this project's EPYC, a tiny conv)
        fast = getattr(self.launch, "_call_cpu", None) if getattr(self.launch, "_vm", None) is not None else None
        self._call: Callable[[Sequence[torch.Tensor]], torch.Tensor | tuple[torch.Tensor, ...]] = (
            fast if fast is not None else (lambda a: self.launch(*a)))
        self.device = device
        self._on_cpu = device.type == "cpu"
        self.out_specs = [(tuple(s), d) for s, d in zip(match.sig.output_shapes(), match.sig.output_dtypes())]
        self.__name__ = self.__qualname__ = "boo_" + match.sig.op
        self.__module__ = __name__

    def __call__(self, *tensors: torch.Tensor) -> list[torch.Tensor]:
        if self.perms is not None:
            tensors = tuple(t if p is None else t.permute(p) for t, p in zip(tensors, self.perms))
        args = []
        for t in tensors:
            if t.requires_grad:
                t = t.detach()
            if not t.is_contiguous():
                t = t.contiguous()
            args.append(t)
        logged = _log_var.get()
        if logged is None:
            out = self._call(args)
        else:
            t0 = time.perf_counter_ns()
            out = self._call(args)
            logged.add(self.sig, self.variant_name, time.perf_counter_ns() - t0)
        if not self._on_cpu:
            out = tuple(o.to(self.device) for o in out) if isinstance(out, tuple) else out.to(self.device)
        return list(out) if isinstance(out, tuple) else [out]


@torch.library.custom_op("boo::kernel", mutates_args=())
def _kernel_op(key: str, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    return _REGISTRY[key](*tensors)


@_kernel_op.register_fake
def _(key: str, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    dev = tensors[0].device
    return [torch.empty(s, dtype=d, device=dev) for s, d in _REGISTRY[key].out_specs]


def _fake(node: fx.Node) -> Any:
    return node.meta.get("val")


class BooBackend:
    """A torch.compile backend: `backend(gm, example_inputs)`. After compiling, `kernels` lists the signatures
    it called (first use order, each once), `fallbacks` the (aten op, reason) pairs left to the nested backend,
    `compile_s` the seconds spent compiling (or loading) our kernels."""

    def __init__(self, nested_backend: str | CompilerFn = "eager", fusions: Sequence[str] | None = None,
                 variant: Variant | str | None = None, kernels: str | None = None) -> None:
        if not callable(nested_backend) and nested_backend not in ("eager", "inductor"):
            raise BooNNError(f"nested_backend {nested_backend!r}: expected 'eager', 'inductor' or a callable")
        self.nested_backend = nested_backend
        self.fusions = None if fusions is None else set(fusions)
        self.variant = as_variant(variant) or (kernels_variant(kernels) if kernels else None)
        self.kernels: list[OpSignature] = []
        #: every kernel call bound into a graph (its launchable, artifact and variant), in graph order
        self.calls: list[KernelCall] = []
        self.fallbacks: list[tuple[str, str]] = []
        self.compile_s = 0.0
        self.graphs = 0

    def __repr__(self) -> str:
        nested = self.nested_backend if isinstance(self.nested_backend, str) else "callable"
        return f"BooBackend(nested={nested}, kernels={len(self.kernels)}, fallbacks={len(self.fallbacks)})"

    # ---- the rewrite ------------------------------------------------------------------------------------
    def rewrite(self, gm: fx.GraphModule, *, as_custom_op: bool) -> fx.GraphModule:
        """Replace every matched node of `gm` by a call of our kernel (in place); returns `gm`."""
        variant = current_variant(self.variant)
        matches, skips = fusion.find_matches(gm)
        if self.fusions is not None:
            skips += [fusion.Skip(m.aten, "not in fusions") for m in matches if m.aten not in self.fusions]
            matches = [m for m in matches if m.aten in self.fusions]
        renamed: dict[fx.Node, fx.Node] = {}     # a replaced node -> the node now holding its value
        for m in matches:
            m.inputs = [renamed.get(i, i) if isinstance(i, fx.Node) else i for i in m.inputs]
            call = KernelCall(m, variant, _first_device(m))
            self.compile_s += call.compile_s
            if m.sig not in self.kernels:
                self.kernels.append(m.sig)
            _REGISTRY[call.key] = call
            self.calls.append(call)
            item = self._replace(gm.graph, m, call, as_custom_op)
            if item is not None:
                renamed[m.replaced] = item
        gm.graph.eliminate_dead_code()
        gm.graph.lint()
        gm.recompile()
        others = [(op, "no boo kernel for this op") for op in fusion.unfused_ops(gm)]
        new = [(s.aten, s.reason) for s in skips] + others
        self.fallbacks += [f for f in new if f not in self.fallbacks]
        self.graphs += 1
        log.info("iree_boo graph %d: %d ops on boo kernels, %d left to the nested backend%s", self.graphs,
                 len(matches), len(new), "".join(f"; {op}: {why}" for op, why in new))
        return gm

    def _replace(self, graph: fx.Graph, m: fusion.Match, call: KernelCall, as_custom_op: bool) -> fx.Node | None:
        """Put the kernel call in `m.node`'s place; returns the node now holding a single result's value."""
        anchor = m.node
        with graph.inserting_before(anchor):
            args = _kernel_args(graph, m)
            if as_custom_op:
                new = graph.call_function(torch.ops.boo.kernel.default, (call.key, args))
            else:
                new = graph.call_function(call, tuple(args))
            _fake_results(new, args, call)
        if m.outputs is None:
            item: fx.Node | None = _single_result(graph, new, m)
        else:
            item = None
            _index_results(graph, new, m, m.outputs)
        if m.fused is not None:
            graph.erase_node(m.fused)
        if not m.node.users:
            graph.erase_node(m.node)
        return item

    # ---- torch.compile ------------------------------------------------------------------------------------
    def __call__(self, gm: fx.GraphModule, example_inputs: list[torch.Tensor]) -> CompiledFn:
        if callable(self.nested_backend):
            nested = self.nested_backend
            return self._aot(lambda g, ex: nested(self.rewrite(g, as_custom_op=True), ex))(gm, example_inputs)
        if self.nested_backend == "eager":
            return self._aot(None)(gm, example_inputs)
        return self._inductor(gm, example_inputs)

    def _aot(self, compiler: CompilerFn | None) -> CompilerFn:
        from functorch.compile import make_boxed_func
        from torch._dynamo.backends.common import aot_autograd

        def eager(g: fx.GraphModule, _ex: list[torch.Tensor]) -> CompiledFn:
            return make_boxed_func(self.rewrite(g, as_custom_op=False).forward)

        return aot_autograd(fw_compiler=compiler or eager, bw_compiler=compiler or eager)

    def _inductor(self, gm: fx.GraphModule, example_inputs: list[torch.Tensor]) -> Any:
        from torch._inductor.compile_fx import compile_fx, compile_fx_inner
        from torch._inductor.decomposition import select_decomp_table

        def inner(g: fx.GraphModule, ex: list[torch.Tensor], **kwargs: Any) -> OutputCode:
            return compile_fx_inner(self.rewrite(g, as_custom_op=True), ex, **kwargs)

        ours = {op for m in fusion.FUSED_OPS for op in _overloads(m)}
        decomps = {k: v for k, v in select_decomp_table().items() if k not in ours}
        return compile_fx(gm, example_inputs, inner_compile=inner, decompositions=decomps)


def _kernel_args(graph: fx.Graph, m: fusion.Match) -> list[fx.Node]:
    """The kernel call's arguments: `m.inputs`, each `fusion.Ones` made a node of all ones where the graph is."""
    args: list[fx.Node] = []
    for i in m.inputs:
        if isinstance(i, fusion.Ones):
            like = _fake(i.like)
            ones = graph.call_function(torch.ops.aten.ones.default, (list(i.shape),),
                                       {"dtype": like.dtype, "device": like.device})
            ones.meta["val"] = like.new_ones(i.shape)
            args.append(ones)
        else:
            args.append(i)
    return args


def _fake_results(new: fx.Node, args: list[fx.Node], call: KernelCall) -> None:
    """Give the kernel call's node fake results of the kernel's output shapes, where its arguments are fake."""
    fakes = [_fake(a) for a in args]
    if all(isinstance(f, torch.Tensor) for f in fakes):
        mode = getattr(fakes[0], "fake_mode", None)
        if mode is not None:
            with mode:
                new.meta["val"] = [torch.empty(s, dtype=d, device=fakes[0].device) for s, d in call.out_specs]


def _single_result(graph: fx.Graph, new: fx.Node, m: fusion.Match) -> fx.Node:
    """Make the users of `m.replaced` take the kernel's one result; returns the node holding it."""
    with graph.inserting_after(new):
        item = graph.call_function(operator.getitem, (new, 0))
    if "val" in new.meta:
        item.meta["val"] = new.meta["val"][0]
    m.replaced.replace_all_uses_with(item)
    return item


def _index_results(graph: fx.Graph, new: fx.Node, m: fusion.Match, outputs: dict[int, int]) -> None:
    """Make each index into `m.node`'s tuple result index the kernel's results (`outputs`: aten's -> ours)."""
    for user in list(m.node.users):
        if user.target is not operator.getitem:
            raise BooNNError(f"{m.aten}: a user of its tuple result is not an index ({user.target})")
        j = outputs.get(int(user.args[1]))  # type: ignore[arg-type]
        if j is None:      # an output the mask did not ask for (None in aten's result)
            if user.users:
                raise BooNNError(f"{m.aten}: output {user.args[1]} is used but not computed")
            graph.erase_node(user)
            continue
        user.args = (new, j)
        if "val" in new.meta:
            user.meta["val"] = new.meta["val"][j]


def _overloads(op: OpOverload) -> list[OpOverload | OpOverloadPacket]:
    """The op overload and its packet (a decomposition table may be keyed by either)."""
    return [op, getattr(op, "overloadpacket", op)]


def _first_device(m: fusion.Match) -> torch.device:
    for i in m.inputs:
        v = _fake(i) if isinstance(i, fx.Node) else None
        if isinstance(v, torch.Tensor):
            return v.device
    return torch.device("cpu")


def backend(nested_backend: str | CompilerFn = "eager", fusions: Sequence[str] | None = None,
            variant: Variant | str | None = None, kernels: str | None = None) -> BooBackend:
    """A torch.compile backend running our kernels for the ops `fusion` matches (all of them, or only the aten
    ops named in `fusions`, e.g. ["aten.convolution"]) and `nested_backend` for the rest. `kernels`: "best"
    (the best known kernels for this machine, the default) or "boo" (each kernel as iree-turbine's BOO builds
    it), when no `variant` is given."""
    return BooBackend(nested_backend, fusions, variant, kernels)


#: `torch.compile(model, backend=iree_boo)`: our kernels + eager for the rest (also the entry point `iree_boo`)
iree_boo = backend("eager")
#: our kernels + inductor for the rest (entry point `iree_boo_inductor`)
iree_boo_inductor = backend("inductor")
