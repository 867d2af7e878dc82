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

from collections.abc import Mapping
from typing import Any

from textual.widgets import DataTable
from textual.widgets._data_table import ColumnKey, RowKey


class ResultsTable(DataTable):
    #: how many updates took the row-only path (the tests check it is the one in use)
    row_updates = 0

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
