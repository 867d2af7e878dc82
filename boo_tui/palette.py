"""The dashboard's key bindings, and the command palette derived from them.

One list says what the dashboard can do: every binding with a tooltip is a palette command (its description
the title, its tooltip the help, which the footer also shows on hover), so a new action appears in both places or
in neither.
"""
from __future__ import annotations

import functools
from collections.abc import Iterable

from textual.binding import Binding, BindingType
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.types import IgnoreReturnCallbackType

#: The dashboard's keys. `description`: the footer's label (short; also the palette's title); `tooltip`: what the
#: action does (the palette's help). Quit has no tooltip: Textual's own palette commands offer it already.
BINDINGS: list[BindingType] = [
    Binding("q", "quit", "Quit", priority=False),
    Binding("r", "run_all", "Run", tooltip="Compile and measure every queued job"),
    Binding("space", "run_selected", "Run selected", show=False,
            tooltip="Run the job under the cursor (re-run it if it finished)"),
    Binding("R", "rerun", "Re-run selected", show=False, tooltip="Measure the selected job again"),
    Binding("ctrl+r", "rerun_all", "Re-run all finished", show=False, tooltip="Measure every finished job again"),
    Binding("x", "cancel", "Cancel selected", show=False, tooltip="Cancel the job under the cursor"),
    Binding("X", "cancel_all", "Cancel all", show=False, tooltip="Cancel every queued or running job"),
    Binding("a", "add_command", "Add", tooltip="Add a command: a MIOpenDriver command line (validated as you submit)"),
    Binding("o", "load_file", "Load a commands file", show=False,
            tooltip="Add every command of a .txt/.tsv commands file"),
    Binding("v", "add_variant", "Add a variant", show=False,
            tooltip="A tuning spec (.mlir) or compiler flags, compared against the baseline"),
    Binding("t", "tune", "Tune", show=False,
            tooltip="Autotune the selected command (or every command shown) on this machine, live; "
                    "writes tuned.mlir, tuned.toml and report.md"),
    Binding("w", "export", "Export", tooltip="Write the results as .csv, .json or .md"),
    Binding("h", "history", "History", tooltip="Past runs in the results database; open or compare two"),
    Binding("m", "compare", "Compare", tooltip="Compare variants: commands x variants ratios and overlaid histograms"),
    Binding("p", "roofline", "Roofline", show=False,
            tooltip="The roofline: every measured kernel's GFLOP/s against its flop/byte under this machine's "
                    "measured peaks"),
    Binding("c", "copy_repro", "Copy", tooltip="Copy the selected job's reproducer command to the clipboard"),
    Binding("s", "sort", "Sort by next column", show=False, tooltip="Cycle the results table's sort column"),
    Binding("slash", "focus_filter", "Filter", tooltip="Filter rows: op:conv status:failed free text"),
    # the panes beside (or below) the table: a number key each, as the footer shows; Enter on a row opens Detail
    Binding("1", "show_pane('hist')", "Histogram", show=False, tooltip="Show the selected job's latency histogram"),
    Binding("2", "show_pane('timeline')", "Samples", show=False, tooltip="Show the selected job's samples over time"),
    Binding("3", "show_pane('detail')", "Detail", show=False,
            tooltip="Show everything about the selected job (also Enter on a row)"),
    Binding("4", "show_pane('log')", "Log", show=False, tooltip="Show the run's log"),
]


def palette_entries(bindings: Iterable[BindingType]) -> list[tuple[str, str, str]]:
    """(action, title, help) of every binding that has a description and a tooltip, in binding order, once per
    action."""
    out: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for b in bindings:
        if isinstance(b, Binding) and b.description and b.tooltip and b.action not in seen:
            seen.add(b.action)
            out.append((b.action, b.description, b.tooltip))
    return out


def _binding_keys(bindings: Iterable[BindingType]) -> dict[str, Binding]:
    return {b.action: b for b in bindings if isinstance(b, Binding)}


class BooCommands(Provider):
    """Every dashboard action in the command palette (ctrl+p), from the app's key bindings."""

    def _commands(self) -> Iterable[tuple[str, str, IgnoreReturnCallbackType]]:
        app = self.app
        bindings = list(getattr(app, "BINDINGS", []))
        keys = _binding_keys(bindings)
        for action, title, help_text in palette_entries(bindings):
            key = app.get_key_display(keys[action])
            yield title, f"{help_text}  ({key})", functools.partial(app.run_action, action)

    async def discover(self) -> Hits:
        for title, help_text, callback in self._commands():
            yield DiscoveryHit(title, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, callback in self._commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help_text)
