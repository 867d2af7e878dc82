"""The results table's drawn lines (boo_tui/table.py), kept between frames.

A line is drawn once and kept with what it was drawn for: the layout (bumped when a column's width or label
changes), the width, focus, and for a row its stripe, cursor and hover. A frame draws again only the lines whose
stamp changed, and a row whose cells changed is forgotten (`forget`) by the table.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from rich.console import Console
from rich.style import Style
from textual.strip import Strip

from .table_lines import Cell, Column, line_segments

#: the component class of each kind of line (the widget declares them, its CSS styles them)
HEADER, CURSOR, HOVER, EVEN, ODD = ("results-table--header", "results-table--cursor", "results-table--hover",
                                    "results-table--even-row", "results-table--odd-row")


class RowLook(NamedTuple):
    """How one row is drawn, apart from its cells."""

    row: int
    cursor: bool
    hover: bool
    zebra: bool


class TableStrips:
    """The header's and the rows' strips, each with its stamp. `style_of(component class)`: the widget's style
    for one of the classes above; `console`: the app's (cell widths)."""

    def __init__(self, style_of: Callable[[str], Style]) -> None:
        self._style_of = style_of
        self._rows: dict[str, tuple[tuple[object, ...], Strip]] = {}
        self._header: tuple[tuple[object, ...], Strip] | None = None
        self.layout = 0          # bumped when a column's width or label changes
        self.rendered = 0        # rows drawn (tests and benchmarks count it)

    def relayout(self) -> None:
        """Columns changed width or label: every line is drawn again."""
        self.layout += 1
        self.clear()

    def clear(self) -> None:
        """The styles changed: every line is drawn again (the layout is the same)."""
        self._rows.clear()
        self._header = None

    def forget(self, key: str) -> None:
        self._rows.pop(key, None)

    def header(self, console: Console, columns: Sequence[Column], fill: int, width: int, focus: bool) -> Strip:
        stamp = (self.layout, width, focus)
        if self._header is None or self._header[0] != stamp:
            labels = [c.label for c in columns]
            self._header = (stamp, Strip(line_segments(console, columns, labels, self._style_of(HEADER), None,
                                                       fill)).simplify())
        return self._header[1]

    def row(self, key: str, look: RowLook, cells: Callable[[], Sequence[Cell]], console: Console,
            columns: Sequence[Column], fill: int, width: int, focus: bool) -> Strip:
        """Row `key`'s strip; `cells()` is called only when it must be drawn."""
        stamp = (self.layout, width, focus, look.row % 2, look.cursor, look.hover)
        cached = self._rows.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        style = self._style_of((ODD if look.row % 2 else EVEN) if look.zebra else ODD)
        post: Style | None = None
        if look.hover:
            style += self._style_of(HOVER)
        if look.cursor:
            cursor_style = self._style_of(CURSOR)
            style += cursor_style
            post = Style(color=cursor_style.color) if cursor_style.color else None
        strip = Strip(line_segments(console, columns, cells(), style, post, fill)).simplify()
        self._rows[key] = (stamp, strip)
        self.rendered += 1
        return strip
