"""Models measured end to end: eager vs the `iree_boo` torch.compile backend (vs it with each variant), with the
honesty rules of a kernel, and where the time goes per kernel (`boo-tui model`)."""
from __future__ import annotations

from .bench import ModelBenchError, ModelJob
from .breakdown import breakdown_lines, measure_breakdown
from .judge import compare_tensors
from .run import bench_model

__all__ = ["ModelBenchError", "ModelJob", "bench_model", "breakdown_lines", "compare_tensors", "measure_breakdown"]
