"""The results table: a DataTable whose cell updates re-render only the row they touch.

Textual's `DataTable.update_cell` bumps one table-wide counter that is part of every render cache key, so a
single changed cell (a progress count, a median) throws away the rendering of every visible cell. With the
results table that cost 30-47 ms of the UI thread per frame for 17 visible rows (measured with
benchmarks/bench_tui_stall.py), several times a second while a kernel is measured: the largest part of the
dashboard's event-loop stalls. `update_row` writes the new values and drops only that row's cached renders.

It reaches into DataTable's caches (Textual 8.x, the version range pyproject allows); if they are not there
(another Textual), it falls back to `update_cell`, which is correct, only slower.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import DataTable
from textual.widgets._data_table import ColumnKey, RowKey


def _one_line_width(cell: Any) -> int | None:
    """The width of a one-line cell as DataTable would measure it, or None when only measuring can tell."""
    if isinstance(cell, Text):
        return cell.cell_len if "\n" not in cell.plain else None
    if isinstance(cell, str):    # DataTable reads a str as markup: only plain text is measured here
        return cell_len(cell) if "[" not in cell and "\n" not in cell else None
    return None


class ResultsTable(DataTable):
    #: how many updates took the row-only path (the tests check it is the one in use)
    row_updates = 0

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        """Column widths from the new rows. DataTable measures every new cell through the console (a terminal-size
        query each: 0.5-0.6 s of the UI thread for 2,000 rows of 14 columns, a captured model's commands file);
        our cells are one-line Text or plain strings, whose width is their cell length, so only other rows go
        through DataTable's own measuring. Same widths, ~20x less time."""
        with self._redrawn_if_widths_change():
            self._measure_new_rows(new_rows)

    def _update_column_widths(self, updated_cells: set[Any]) -> None:
        with self._redrawn_if_widths_change():
            super()._update_column_widths(updated_cells)

    @contextmanager
    def _redrawn_if_widths_change(self) -> Iterator[None]:
        """DataTable's cell, row and line renders are keyed by a counter (_update_count) that measuring the
        columns (idle time) does not bump: rows the screen drew before the measuring (a busy host) kept the
        headers' widths ("co" for "conv") until some other change. A new count renders them again."""
        before = [(c.key, c.content_width) for c in self.columns.values()]
        yield
        if [(c.key, c.content_width) for c in self.columns.values()] != before and hasattr(self, "_update_count"):
            self._update_count += 1
            self.refresh()

    def _measure_new_rows(self, new_rows: Iterable[RowKey]) -> None:
        try:
            columns = self.ordered_columns
            rest: list[RowKey] = []
            for row_key in new_rows:
                row, data = self.rows.get(row_key), self._data.get(row_key)
                if row is None or data is None or row_key not in self._row_locations:
                    continue
                widths = [_one_line_width(data.get(column.key)) for column in columns]
                if row.label is not None or row.auto_height or None in widths:
                    rest.append(row_key)
                    continue
                for column, width in zip(columns, widths):
                    if width is not None and width > column.content_width:
                        column.content_width = width
        except AttributeError:   # a Textual without these internals: its own way
            super()._update_dimensions(new_rows)
            return
        super()._update_dimensions(rest)   # the rest, and the table's virtual size

    def update_row(self, row_key: str, values: Mapping[str, Any]) -> None:
        """Set several cells of one row; only that row is rendered again. Column widths stay as they are
        (as with update_cell's default)."""
        try:
            self._update_row_cached(RowKey(row_key), values)
        except AttributeError:  # a Textual without these caches: the table-wide way
            for column, value in values.items():
                self.update_cell(row_key, column, value)

    def _update_row_cached(self, row_key: RowKey, values: Mapping[str, Any]) -> None:
        row_index = self._row_locations.get(row_key)
        data = self._data.get(row_key)
        if row_index is None or data is None:
            for column, value in values.items():
                self.update_cell(row_key, column, value)  # raises CellDoesNotExist
            return
        changed = False
        for column, value in values.items():
            ck = ColumnKey(column)
            if ck not in self._column_locations:
                self.update_cell(row_key, column, value)  # raises CellDoesNotExist
            if data.get(ck) != value:
                data[ck] = value
                changed = True
        if not changed:
            return
        # cell and row renders are keyed by row key, the row's renderables by its index, lines by their place
        # on screen (cheap to rebuild from the row renders, so they all go)
        for cache in (self._cell_render_cache, self._row_render_cache):
            for key in [k for k in cache.keys() if k[0] == row_key]:
                cache.discard(key)
        for key in [k for k in self._row_renderable_cache.keys() if k[1] == row_index]:
            self._row_renderable_cache.discard(key)
        self._line_cache.clear()
        self.row_updates += 1
        self.refresh_row(row_index)
