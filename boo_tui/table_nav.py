"""What the keys and the mouse do to the results table (table.py's `ResultsTable`): its cursor, the row under the
mouse, scrolling, and the header click that asks to sort; the table posts what they mean (`_post`)."""
from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Spacing
from textual.scroll_view import ScrollView

from .table_lines import TableRows, column_at


class TableNavigation(ScrollView):
    """What the keys and the mouse do to the results table (its cursor, hover row and scrolling)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Select", show=False),
        Binding("up", "cursor_up", "Cursor up", show=False),
        Binding("down", "cursor_down", "Cursor down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("ctrl+home", "first_row", "Top", show=False),
        Binding("ctrl+end", "last_row", "Bottom", show=False),
        Binding("home", "leftmost", "Home", show=False),
        Binding("end", "rightmost", "End", show=False),
        Binding("left", "scroll_left", "Left", show=False),
        Binding("right", "scroll_right", "Right", show=False),
    ]

    # (ResultsTable's)
    cursor_row: int
    header_height: int
    _hover_row: int | None
    _rows: TableRows

    if TYPE_CHECKING:
        @property
        def cursor_key(self) -> str | None: ...
        def _refresh_row(self, row: int) -> None: ...
        def _post(self, kind: str, key: str) -> None: ...

    # ---- the cursor and the keys -------------------------------------------------------------------------
    def move_cursor(self, row: int, *, scroll: bool = True, animate: bool = False) -> None:
        row = max(0, min(row, len(self._rows.keys) - 1))
        old, self.cursor_row = self.cursor_row, row
        if row != old:
            self._refresh_row(old)
            self._refresh_row(row)
        if scroll:
            self._scroll_to_cursor(animate)
        if row != old and self.cursor_key is not None:
            self._post("highlighted", self.cursor_key)

    def _scroll_to_cursor(self, animate: bool = False) -> None:
        if self._rows.keys:
            region = Region(int(self.scroll_x), self.header_height + self.cursor_row, max(1, self.size.width), 1)
            self.scroll_to_region(region, animate=animate, spacing=Spacing(self.header_height, 0, 0, 0), force=True)

    def _keyboard(self, row: int) -> None:
        self._set_hover(None)
        self.move_cursor(row)

    def action_cursor_up(self) -> None:
        self._keyboard(self.cursor_row - 1)

    def action_cursor_down(self) -> None:
        self._keyboard(self.cursor_row + 1)

    def _page(self) -> int:
        return max(1, self.scrollable_content_region.height - self.header_height)

    def action_page_down(self) -> None:
        self.scroll_to(y=self.scroll_y + self._page(), animate=False, force=True)
        self._keyboard(self.cursor_row + self._page())

    def action_page_up(self) -> None:
        self.scroll_to(y=self.scroll_y - self._page(), animate=False, force=True)
        self._keyboard(self.cursor_row - self._page())

    def action_first_row(self) -> None:
        self._keyboard(0)

    def action_last_row(self) -> None:
        self._keyboard(len(self._rows.keys) - 1)

    def action_leftmost(self) -> None:
        self.scroll_to(x=0, animate=False)

    def action_rightmost(self) -> None:
        self.scroll_to(x=self.max_scroll_x, animate=False)

    def action_select_cursor(self) -> None:
        if self.cursor_key is not None:
            self._post("selected", self.cursor_key)

    # ---- the mouse ---------------------------------------------------------------------------------------
    def _row_under(self, event: events.MouseEvent) -> tuple[int | None, int | None]:
        """(row, column) under the mouse; row -1 is the header, None off the rows."""
        offset = event.get_content_offset(self)
        if offset is None:
            return None, None
        column = column_at(self._rows.columns, offset.x + int(self.scroll_x))
        if offset.y < self.header_height:
            return -1, column
        row = offset.y - self.header_height + int(self.scroll_y)
        return (row if row < len(self._rows.keys) else None), column

    async def _on_click(self, event: events.Click) -> None:
        row, column = self._row_under(event)
        if row == -1 and column is not None:
            self._post("header", self._rows.columns[column].key)
        elif row is not None and row >= 0:
            again = row == self.cursor_row
            self.move_cursor(row, animate=True)
            if again:
                self.action_select_cursor()
            event.stop()

    def _on_mouse_move(self, event: events.MouseMove) -> None:
        row, _ = self._row_under(event)
        self._set_hover(row if row is not None and row >= 0 else None)

    def _on_leave(self, _: events.Leave) -> None:
        self._set_hover(None)

    def _set_hover(self, row: int | None) -> None:
        if row != self._hover_row:
            old, self._hover_row = self._hover_row, row
            for r in (old, row):
                if r is not None:
                    self._refresh_row(r)
