"""The JSON export (`exporters`): the document, and the same bytes written into a file a result at a time.

A run of 200,000 jobs made its document whole before writing it: every result as a dict (`JobResult.to_dict`),
a NaN-free copy of all of them (`json_safe`), then the text, ~3 copies of the run at the peak. `write_json`
writes the text of one result at a time where the document holds its results, indented as `json.dumps` indents
them, so the file is byte for byte `render_json`'s.
"""
from __future__ import annotations

import datetime
import io
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import IO, Any

from .columns import columns_note, geomean_vs_torch, torch_ratios
from .compare import BASELINE_LABEL, Comparison
from .comparisons import by_variant, column_label, comparison_key, summarize
from .results import JobResult
from .weights import ModelLine

Comparisons = Mapping[tuple[str, str, str], Comparison]
#: what the document holds where its results and its comparisons go while `write_json` writes them (no text of a
#: run holds a NUL)
_SLOTS = ("\x00results\x00", "\x00comparisons\x00")


def json_safe(v: object) -> object:
    """`v` (any JSON-able value) with every NaN / inf made null (JSON has none), so every JSON parser reads the
    file."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_safe(x) for x in v]
    return v


def _dumps(value: object) -> str:
    return json.dumps(json_safe(value), indent=1, allow_nan=False, default=str)


def result_doc(r: JobResult, comparisons: Comparisons, vs_torch: Mapping[str, float]) -> dict[str, Any]:
    """One result as the document holds it: every field (raw samples included), its column, its comparison and
    its ratio to eager torch (`columns.torch_ratios`)."""
    d = r.to_dict()
    cmp = comparisons.get(comparison_key(r))
    d["column"] = column_label(r)
    d["comparison"] = cmp.to_dict() if cmp else None
    d["ratio_vs_torch"] = vs_torch.get(r.job_id)
    return d


def _comparison_doc(key: tuple[str, str, str], c: Comparison) -> dict[str, Any]:
    t, cmd, label = key
    return {"target": t, "command": cmd, "variant": label, "baseline": BASELINE_LABEL, **c.to_dict()}


def _document(all_results: Sequence[JobResult], results: list[dict[str, Any]] | str,
              comparisons_doc: list[dict[str, Any]] | str, *,
              environment: dict[str, Any] | None, run: Mapping[str, Any] | None, comparisons: Comparisons,
              model: Sequence[ModelLine] | None) -> dict[str, Any]:
    """The document, its results and comparisons given as their docs (`render_json`) or as the slot text
    `write_json` writes them in place of."""
    return {
        "format": "boo-tui-results",
        "format_version": 1,
        "exported_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "environment": environment,
        "run": run,
        "columns": columns_note(all_results),
        "vs_torch": {label: {"geomean": g, "commands": n} for label, (g, n) in geomean_vs_torch(all_results).items()},
        "results": results,
        "comparisons": comparisons_doc,
        "summary": {label: s.to_dict() for label, s in summarize(by_variant(comparisons)).items()},
        "model": [line.to_dict() for line in model or ()],
    }


def render_json(results: Sequence[JobResult], *, environment: dict[str, Any] | None, run: Mapping[str, Any] | None,
                comparisons: Comparisons, model: Sequence[ModelLine] | None = None) -> str:
    """The whole document as text."""
    vs_torch = torch_ratios(results)
    doc = _document(results, [result_doc(r, comparisons, vs_torch) for r in results],
                    [_comparison_doc(k, c) for k, c in comparisons.items()],
                    environment=environment, run=run, comparisons=comparisons, model=model)
    return _dumps(doc) + "\n"


def write_json(f: IO[bytes], results: Sequence[JobResult], *, environment: dict[str, Any] | None,
               run: Mapping[str, Any] | None, comparisons: Comparisons,
               model: Sequence[ModelLine] | None = None) -> None:
    """`render_json`'s text, UTF-8, into `f`, a result (and a comparison) at a time: never all of them as dicts."""
    out = io.TextIOWrapper(f, encoding="utf-8", newline="")
    doc = _document(results, *_SLOTS, environment=environment, run=run, comparisons=comparisons, model=model)
    text = _dumps(doc) + "\n"
    slots = [json.dumps(slot) for slot in _SLOTS]
    if any(text.count(slot) != 1 for slot in slots):   # (a NUL in the environment, say): as render_json makes it
        out.write(render_json(results, environment=environment, run=run, comparisons=comparisons,
                              model=model))
    else:
        vs_torch = torch_ratios(results)
        items = ((result_doc(r, comparisons, vs_torch) for r in results),
                 (_comparison_doc(k, c) for k, c in comparisons.items()))
        for slot, docs in zip(slots, items):
            before, _, text = text.partition(slot)
            out.write(before)
            _write_list(out, docs)
        out.write(text)
    out.flush()
    out.detach()   # `f` is the caller's to close


def _write_list(out: IO[str], docs: Iterable[dict[str, Any]]) -> None:
    """A list of the document's (at depth 1 of indent=1), as json.dumps writes it: `[`, each item at depth 2, `]`."""
    first = True
    for doc in docs:
        out.write("[\n  " if first else ",\n  ")
        out.write(_dumps(doc).replace("\n", "\n  "))
        first = False
    out.write("[]" if first else "\n ]")
