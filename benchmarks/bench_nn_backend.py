"""What the iree_boo backend costs per fused op beyond the kernel, on this CPU.

Two graphs, a chain of 1 and of 6 conv+bias+relu (each fused into the same kernel of ours), compiled with
iree_boo (nested eager) and run under no_grad on tiny tensors so the kernel itself is small. Per call (median of
blocks):
  graph1, graph6 - the compiled graphs: dynamo's guards + aot_autograd's wrapper (once per graph) + per op our
                   KernelCall, the launchable and the kernel
  launch         - the launchable alone, `Launchable(*tensors)` (DLPack in and out, the VM call)
  kernel         - the kernel alone, `Launchable.prepare(...).invoke()` (arguments already on the device)
  eager          - torch's own conv + relu, for scale
Per fused op: (graph6 - graph1) / 5; beyond the kernel: that minus `kernel`, of which the launchable's share is
launch - kernel and the backend's own (KernelCall: permute/detach checks, tally check, list) the rest. The
per-graph cost (dynamo + aot_autograd, paid once per compiled graph call whatever it holds) is graph1 - one op.

    PYTHONPATH=. python3 benchmarks/bench_nn_backend.py [--calls 2000]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from boo_engine.nn import backend


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def per_call_us(fn, calls: int, blocks: int = 15) -> float:
    for _ in range(max(50, calls // 10)):
        fn()
    samples = []
    for _ in range(blocks):
        t0 = time.perf_counter_ns()
        for _ in range(calls // blocks):
            fn()
        samples.append((time.perf_counter_ns() - t0) / (calls // blocks) / 1e3)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=3000)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    convs = [torch.nn.Conv2d(4, 4, 3, padding=1) for _ in range(6)]
    x = torch.randn(1, 4, 8, 8)

    def chain(n):
        def f(t):
            for c in convs[:n]:
                t = torch.relu(c(t))
            return t
        return f

    times, backends = {}, {}
    with torch.no_grad():
        for n in (1, 6):
            be = backends[n] = backend("eager")
            compiled = torch.compile(chain(n), backend=be, dynamic=False)
            torch.testing.assert_close(compiled(x), chain(n)(x), rtol=1e-4, atol=1e-5)
            assert len(be.calls) == n
            times[n] = per_call_us(lambda: compiled(x), args.calls)
        call = backends[1].calls[0]
        launch = call.launch
        w, b = convs[0].weight.detach(), convs[0].bias.detach()
        prepared = launch.prepare(x, w, b)
        t_launch = per_call_us(lambda: launch(x, w, b), args.calls)
        t_kernel = per_call_us(prepared.invoke, args.calls)
        # the kernel with nothing of Python's around it but the VM call: arguments already imported, results
        # left in IREE (what iree-benchmark-module times): the strictest yardstick for "beyond the kernel"
        import iree.runtime as rt
        from torch.utils.dlpack import to_dlpack
        vm_context, vm_function = launch._vm
        arg_list = rt.VmVariantList(3)
        for t in (x, w, b):
            arg_list.push_ref(launch.module.device.from_dlpack_capsule(to_dlpack(t)))
        t_raw = per_call_us(lambda: vm_context.invoke(vm_function, arg_list, rt.VmVariantList(1)), args.calls)
        t_eager = per_call_us(lambda: chain(1)(x), args.calls)
    per_op = (times[6] - times[1]) / 5
    print(f"CPU: {cpu_model()}  (torch {torch.__version__}, 1 thread)")
    print(f"kernel: {call.sig.func_name}")
    print(f"per call, median of blocks: graph1 {times[1]:.1f} us | graph6 {times[6]:.1f} us | "
          f"launchable {t_launch:.1f} us | kernel {t_kernel:.1f} us | eager torch conv+relu {t_eager:.1f} us")
    print(f"raw VM call (arguments on the device, results left in IREE) {t_raw:.1f} us: per fused op beyond it "
          f"{per_op - t_raw:.1f} us (goal < 20)")
    print(f"per fused op {per_op:.1f} us; beyond the kernel {per_op - t_kernel:.1f} us "
          f"(launchable {t_launch - t_kernel:.1f} us + backend {per_op - t_launch:.1f} us); "
          f"per compiled graph call (dynamo + aot_autograd) {times[1] - per_op:.1f} us")


if __name__ == "__main__":
    main()
