"""The results table: a Line API widget that keeps its rows as keys and draws only the lines on screen.

Textual's DataTable stores every cell of every row and does bookkeeping per added row (~0.15 ms): a captured
model's 2,000 jobs were a 0.3-0.5 s frame each time the table was built, and each live update scanned its render
caches and summed the heights of the rows above (docs/performance.md). Here a build is the order of the keys
(`set_rows`); a row's cells come from `source(key)` when the row is drawn or measured, and stay cached until
`invalidate` says the row changed. Column widths follow the widest cell of the rows shown: rows on screen are
measured before they are drawn, the others a chunk at a time on a timer, so the event loop is never held for long.
Only the rows whose cells changed are drawn again.

It behaves as the dashboard's DataTable did: a row cursor (up/down, page up/down, ctrl+home/ctrl+end; home/end
and left/right scroll sideways), zebra stripes, a click moves the cursor (a click on the cursor's row or Enter
selects it), a click on a header asks to sort by that column, and the cursor stays on its key when the rows are
set again.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar

from textual.geometry import Region, Size
from textual.message import Message
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget

from .table_lines import Cell, Column, RowSource, TableRows
from .table_nav import TableNavigation
from .table_strips import CURSOR, EVEN, HEADER, HOVER, ODD, RowLook, TableStrips

MEASURE_CHUNK = 100          # rows measured per timer tick (~50 us a row: a few ms of the event loop)
MEASURE_EVERY_S = 0.01       # how often the measuring timer ticks while rows wait to be measured

#: the theme's colours as the other screens' DataTables use them, so every table of the app looks alike
_CSS = """
    ResultsTable {
        background: $surface;
        color: $foreground;
        &:focus {
            background-tint: $foreground 5%;
            & > .results-table--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .results-table--header {
                background-tint: $foreground 5%;
            }
        }
        &:dark {
            & > .results-table--even-row {
                background: $surface-darken-1 40%;
            }
        }
        & > .results-table--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        & > .results-table--even-row {
            background: $surface-lighten-1 50%;
        }
        & > .results-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        & > .results-table--hover {
            background: $block-hover-background;
        }
    }
    """


class CellDoesNotExist(LookupError):
    """No such row (or column) in the table."""


class _TableMessage(Message):
    def __init__(self, table: ResultsTable, key: str) -> None:
        self.table = table
        self.key = key
        super().__init__()

    @property
    def control(self) -> ResultsTable:
        return self.table


class ResultsTable(TableNavigation, can_focus=True):
    """Rows are keys; `source(key)` gives a row's cells as {column key: Text or str}."""

    ALLOW_SELECT = False      # (as DataTable: a drag selects no text; a click moves the cursor)

    COMPONENT_CLASSES: ClassVar[set[str]] = {HEADER, CURSOR, HOVER, EVEN, ODD}
    DEFAULT_CSS = _CSS

    class RowHighlighted(_TableMessage):
        """The cursor moved to another row (keys, a click, `move_cursor`): `key` is its row's."""

    class RowSelected(_TableMessage):
        """Enter on the cursor's row, or a click on it: `key` is its row's."""

    class HeaderSelected(_TableMessage):
        """A click on a column's header: `key` is the column's."""

    header_height = 1

    def __init__(self, *, source: RowSource | None = None, zebra_stripes: bool = True,
                 name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._rows = TableRows(source or (lambda key: {}))
        self.zebra_stripes = zebra_stripes
        self.cursor_row = 0
        self._strips = TableStrips(self.get_component_rich_style)   # the lines drawn, with what they were drawn for
        self._hover_row: int | None = None
        self._measurer: Timer | None = None
        #: work done (tests and benchmarks count it): the measuring timer's ticks that measured rows
        self.measure_ticks = 0

    # ---- what the table holds ----------------------------------------------------------------------------
    @property
    def source(self) -> RowSource:
        """Where a row's cells come from: {column key: Text or str} for a row key."""
        return self._rows.source

    @source.setter
    def source(self, source: RowSource) -> None:
        self._rows.source = source

    @property
    def columns(self) -> dict[str, Column]:
        return {c.key: c for c in self._rows.columns}

    @property
    def row_count(self) -> int:
        return len(self._rows.keys)

    @property
    def keys(self) -> list[str]:
        """The rows' keys, top to bottom."""
        return list(self._rows.keys)

    @property
    def cursor_key(self) -> str | None:
        keys = self._rows.keys
        return keys[self.cursor_row] if 0 <= self.cursor_row < len(keys) else None

    @property
    def rows_rendered(self) -> int:
        """Rows drawn so far (tests and benchmarks count them)."""
        return self._strips.rendered

    @property
    def measured(self) -> bool:
        """Every shown row measured: the column widths are final for these rows."""
        return not self._rows.unmeasured

    @property
    def rows_measured(self) -> int:
        return self._rows.rows_measured

    @property
    def cells_kept(self) -> int:
        """Rows whose cells the table holds (those drawn last; the model has the rest)."""
        return self._rows.kept

    @property
    def row_updates(self) -> int:
        """Shown rows that were measured again and had changed."""
        return self._rows.row_updates

    def get_row_index(self, key: str) -> int:
        if key not in self._rows.index:
            raise CellDoesNotExist(f"no row {key!r}")
        return self._rows.index[key]

    def get_row(self, key: str) -> list[Cell]:
        self.get_row_index(key)
        return list(self._cells_of(key))

    def get_row_at(self, index: int) -> list[Cell]:
        if not 0 <= index < self.row_count:
            raise CellDoesNotExist(f"no row {index}")
        return list(self._cells_of(self._rows.keys[index]))

    def get_cell(self, key: str, column: str) -> Cell:
        at = [c.key for c in self._rows.columns]
        if column not in at:
            raise CellDoesNotExist(f"no column {column!r}")
        return self.get_row(key)[at.index(column)]

    # ---- changing it -------------------------------------------------------------------------------------
    def set_columns(self, columns: Sequence[tuple[str, str]], widths: Mapping[str, int] | None = None) -> None:
        """New columns ((key, label), fixed widths by key): every row is measured again."""
        self._rows.set_columns(columns, widths or {})
        self._relayout()
        self._measure_later()

    def set_labels(self, labels: Mapping[str, str]) -> None:
        """New header labels (a sort arrow)."""
        if self._rows.set_labels(labels):
            self._relayout()

    def set_rows(self, keys: Iterable[str], cursor_key: str | None = None) -> None:
        """The rows, top to bottom. The cursor goes to `cursor_key`'s row when it is one of them, else to the top.
        Column widths are those of these rows (as far as they are measured); no message is posted."""
        widths = [c.render_width for c in self._rows.columns]
        self._rows.set_rows(keys)
        self.cursor_row = self._rows.index.get(cursor_key, 0) if cursor_key is not None else 0
        self._hover_row = None
        if widths != [c.render_width for c in self._rows.columns]:
            self._relayout()
        else:       # rows drawn before are drawn again only where their place's stripe or the cursor changed
            self._set_virtual_size(Size(self._rows.width, self.header_height + len(self._rows.keys)))
            self.refresh()
        self._scroll_to_cursor()
        self._measure_later()

    def invalidate(self, keys: Iterable[str]) -> None:
        """These rows' cells changed: rows on screen are drawn again now (only those whose cells differ), other
        shown rows are measured again on the timer, rows not shown are forgotten."""
        visible = self._visible_rows()
        grew = False
        for key in keys:
            self._rows.invalidate(key)
            if self._rows.index.get(key, -1) in visible:
                grew = self._measure(key) or grew
        if grew:
            self._relayout()
        self._measure_later()

    def _post(self, kind: str, key: str) -> None:
        message = {"highlighted": self.RowHighlighted, "selected": self.RowSelected, "header": self.HeaderSelected}
        self.post_message(message[kind](self, key))

    # ---- measuring ---------------------------------------------------------------------------------------
    def _cells_of(self, key: str) -> tuple[Cell, ...]:
        if self._rows.needs_measuring(key) and self._measure(key):
            self._relayout()
        return self._rows.cells(key)

    def _measure(self, key: str, keep: bool = True) -> bool:
        """Measure one row (its cells kept for drawing when `keep`); whether a column grew. A shown row whose cells
        changed is drawn again."""
        changed, grew = self._rows.measure(key, keep)
        if changed:
            self._refresh_row(self._rows.index[key])
        return grew

    def _measure_later(self) -> None:
        if not self._rows.unmeasured:
            return
        if self._measurer is None:
            self._measurer = self.set_interval(MEASURE_EVERY_S, self._measure_some)
        else:
            self._measurer.resume()

    def _measure_some(self) -> None:
        self.measure_ticks += bool(self._rows.unmeasured)
        grew = False
        visible = self._visible_rows()
        for key in self._rows.next_unmeasured(MEASURE_CHUNK):
            grew = self._measure(key, keep=self._rows.index.get(key, -1) in visible) or grew
        if grew:
            self._relayout()
        if not self._rows.unmeasured and self._measurer is not None:
            self._measurer.pause()

    def _visible_rows(self) -> range:
        top = int(self.scroll_y)
        return range(top, min(len(self._rows.keys), top + max(0, self.size.height - self.header_height)))

    # ---- drawing -----------------------------------------------------------------------------------------
    def _relayout(self) -> None:
        """Columns changed width or label: every line is drawn again, and the scrollable size follows."""
        self._strips.relayout()
        self._set_virtual_size(Size(self._rows.width, self.header_height + len(self._rows.keys)))
        self.refresh()

    def _set_virtual_size(self, size: Size) -> None:
        """The scrollable size, without a layout of the whole screen (~20 ms of the event loop, for each build
        while a file's jobs arrive and each column that grows) unless a scrollbar appears or goes: the table's own
        region does not change, only its scrollbars' thumbs and the scroll limits do."""
        if size == self.virtual_size:
            return
        if not self.container_size:          # not laid out yet: the first layout takes it
            self.virtual_size = size
            return
        self.set_reactive(Widget.virtual_size, size)
        self._scroll_update(size)            # (a scrollbar shown or hidden is a layout, by Textual's own reactive)

    def _refresh_row(self, row: int) -> None:
        """Draw a row again: now if it is on screen (a refresh is not free: ~0.5 ms), else when scrolled to."""
        if 0 <= row < len(self._rows.keys):
            self._strips.forget(self._rows.keys[row])
            if row in self._visible_rows():
                self.refresh_line(self.header_height + row)

    def notify_style_update(self) -> None:
        self._strips.clear()
        super().notify_style_update()

    def render_lines(self, crop: Region) -> list[Strip]:
        # the rows about to be drawn are measured first, so every line of this frame has the same column widths
        grew = False
        for row in self._visible_rows():
            key = self._rows.keys[row]
            if self._rows.needs_measuring(key):
                grew = self._measure(key) or grew
        if grew:
            self._relayout()
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        scroll_x, scroll_y = self.scroll_offset
        if y < self.header_height:
            strip = self._header_strip(width)
        elif y - self.header_height + scroll_y < len(self._rows.keys):
            strip = self._row_strip(y - self.header_height + scroll_y, width)
        else:
            return Strip.blank(width, self.rich_style)
        return strip.crop(scroll_x, scroll_x + width).adjust_cell_length(width, self.rich_style)

    def _fill(self, width: int) -> int:
        return max(0, width - self._rows.width)

    def _header_strip(self, width: int) -> Strip:
        return self._strips.header(self.app.console, self._rows.columns, self._fill(width), width, self.has_focus)

    def _row_strip(self, row: int, width: int) -> Strip:
        key = self._rows.keys[row]
        look = RowLook(row, row == self.cursor_row, row == self._hover_row, self.zebra_stripes)
        return self._strips.row(key, look, lambda: self._cells_of(key), self.app.console, self._rows.columns,
                                self._fill(width), width, self.has_focus)
