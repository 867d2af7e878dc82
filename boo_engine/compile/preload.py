"""Fill the kernel cache ahead of time: compile every (command, variant) for one target, in parallel.

Used by `boo-driver --preload --commands-file F --target hip:gfx942`: a cross-compile on a build machine, then
runs on the GPU machine hit the cache (copy or share the cache folder; GPU entries depend only on the arch).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import BooError, first_line
from ..ops.base import OpSignature
from ..targets import Target
from ..variants import BASELINE, Variant
from ..variants.best import best_variant, is_unresolved
from .cache import KernelCache
from .flags import as_target
from .pool import CompilePool

if TYPE_CHECKING:
    from ..commands.command import Command

COMPILED, CACHED, FAILED = "compiled", "cached", "failed"


@dataclass
class PreloadItem:
    func_name: str
    variant: str
    status: str                 # compiled | cached | failed
    seconds: float = 0.0        # export + compile wall time (0 for cached)
    vmfb_path: str | None = None
    error: str | None = None    # one line, for failed
    untrusted: str = ""         # compiled anew because the cached entry was not trusted (Artifact.untrusted)


@dataclass
class PreloadSummary:
    target: str
    items: list[PreloadItem] = field(default_factory=list)
    wall_seconds: float = 0.0

    @property
    def compiled(self) -> list[PreloadItem]:
        return [i for i in self.items if i.status == COMPILED]

    @property
    def cached(self) -> list[PreloadItem]:
        return [i for i in self.items if i.status == CACHED]

    @property
    def failed(self) -> list[PreloadItem]:
        return [i for i in self.items if i.status == FAILED]


def _signature(cmd: Command | OpSignature | str) -> OpSignature:
    """A signature from a Command (has .signature), an OpSignature, or command text."""
    if isinstance(cmd, OpSignature):
        return cmd
    if isinstance(cmd, str):
        from ..commands import parse_command

        return parse_command(cmd)
    return cmd.signature


def preload(commands: Iterable[Command | OpSignature | str], target: Target | str,
            variants: Sequence[Variant] = (BASELINE,), *,
            workers: int | None = None, cache: KernelCache | None = None,
            progress: Callable[[int, int, PreloadItem], None] | None = None,
            timeout_s: float = 600.0, extra_flags: Sequence[str] = ()) -> PreloadSummary:
    """Compile every distinct (command, variant) into the cache. Never raises for one bad kernel: failures are
    listed with their reason. `extra_flags`: a run's --flags, added to every compile as a session adds them.
    `progress(done, total, item)` is called as each kernel finishes."""
    target = as_target(target)
    t0 = time.perf_counter()
    summary = PreloadSummary(target=target.name)
    jobs: list[tuple[OpSignature, Variant]] = []
    seen: set[tuple[str, str]] = set()
    for cmd in commands:
        try:
            sig = _signature(cmd)
        except BooError as e:
            summary.items.append(PreloadItem(str(cmd)[:80], "-", FAILED, error=str(e)))
            continue
        for v in variants or (BASELINE,):
            k = (sig.func_name, v.name)
            if k not in seen:
                seen.add(k)
                # the best column as a run resolves it for this kernel (a tune's winner aside: that lookup is the
                # run's database), so the kernel filled here is the one the run measures
                jobs.append((sig, best_variant(sig, target) if is_unresolved(v) else v))
    total = len(jobs) + len(summary.items)
    done = len(summary.items)
    with CompilePool(workers=workers, timeout_s=timeout_s, cache=cache) as pool:
        futures = [(sig, v, pool.submit(sig, target, v, extra_flags=extra_flags))
                   for sig, v in jobs]
        for sig, v, fut in futures:
            try:
                art = fut.result()
                item = PreloadItem(sig.func_name, v.name, CACHED if art.cache_hit else COMPILED,
                                   seconds=art.compile_seconds, vmfb_path=art.vmfb_path, untrusted=art.untrusted)
            except BooError as e:
                item = PreloadItem(sig.func_name, v.name, FAILED, error=first_line(str(e), 300))
            except Exception as e:  # noqa: BLE001 - one kernel's failure must not stop the others
                item = PreloadItem(sig.func_name, v.name, FAILED, error=first_line(f"{type(e).__name__}: {e}", 300))
            summary.items.append(item)
            done += 1
            if progress is not None:
                progress(done, total, item)
    summary.wall_seconds = time.perf_counter() - t0
    return summary


def format_summary(summary: PreloadSummary) -> str:
    """Human-readable report: one line per failure, then the totals."""
    lines = [f"failed  {i.func_name} [{i.variant}]: {i.error}" for i in summary.failed]
    untrusted = [i for i in summary.items if i.untrusted]
    if untrusted:
        lines.append(f"{len(untrusted)} cached kernel(s) not trusted, compiled anew; the first: "
                     f"{untrusted[0].untrusted}")
    lines.append(f"preload {summary.target}: {len(summary.compiled)} compiled, {len(summary.cached)} already "
                 f"cached, {len(summary.failed)} failed in {summary.wall_seconds:.1f} s")
    return "\n".join(lines)
