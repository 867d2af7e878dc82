"""The results table's rows and the lines it draws, apart from the widget (boo_tui/table.py): what a column is and
how wide it is, the rows as keys with their cells measured when needed (`TableRows`), and one row of cells as the
segments of one screen line. No Textual here, only Rich.

A row is drawn as Textual's DataTable draws one (so the dashboard's table looks like the other screens' tables):
each cell padded by `CELL_PADDING` on both sides, cut with an ellipsis when it is wider than its column (only a
fixed-width column can be), the row's style under the cell's own styles (the verdict colours), and on the cursor
row the cursor's colour over them.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice

from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

CELL_PADDING = 1        # blank cells on each side of every cell
CELL_CACHE = 512        # rows whose cells are kept (those drawn last)


@dataclass
class Column:
    """One column: its key, its header label, a fixed width (None: as wide as its widest cell) and the width of
    the widest cell of the rows shown so far (the label included)."""

    key: str
    label: Text
    width: int | None = None
    content_width: int = 0
    _label_width: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        self._label_width = self.label.cell_len
        self.content_width = max(self.content_width, self._label_width)

    @property
    def text_width(self) -> int:
        """Cells the column's text gets (padding not included)."""
        return self.width if self.width is not None else self.content_width

    @property
    def render_width(self) -> int:
        """Cells the column takes on screen, padding included."""
        return self.text_width + 2 * CELL_PADDING

    def relabel(self, label: Text) -> None:
        self.label = label
        self._label_width = label.cell_len
        self.content_width = max(self.content_width, self._label_width)

    def reset_width(self) -> None:
        self.content_width = self._label_width


#: a cell as the table keeps it: plain text, or Text with its styles
Cell = str | Text
#: a table's rows' cells: row key -> {column key: cell} (a column the row lacks is empty)
RowSource = Callable[[str], Mapping[str, Cell]]


def as_cell(value: Cell) -> Cell:
    """A cell on one line: a str stays plain text (never markup), a Text is kept; a second line, if any, is
    dropped."""
    if "\n" in (value if isinstance(value, str) else value.plain):
        value = value.split("\n")[0]
    return value


def cell_width(cell: Cell) -> int:
    return cell_len(cell) if isinstance(cell, str) else cell.cell_len


def row_cells(columns: Sequence[Column], values: Mapping[str, Cell]) -> tuple[tuple[Cell, ...], tuple[int, ...]]:
    """A row's cells in column order, and their widths."""
    cells = tuple(as_cell(values.get(c.key, "")) for c in columns)
    return cells, tuple(cell_width(c) for c in cells)


def same_cells(a: Sequence[Cell], b: Sequence[Cell]) -> bool:
    """Two rows of cells draw alike (Text's own == ignores the base style: a median turning from dim to plain)."""
    return len(a) == len(b) and all(
        x == y if isinstance(x, str) or isinstance(y, str)
        else x.plain == y.plain and x.style == y.style and x.spans == y.spans for x, y in zip(a, b))


def grow(columns: Sequence[Column], widths: Iterable[int]) -> bool:
    """Widen the columns to fit one row's cell widths; whether any column grew."""
    grew = False
    for column, width in zip(columns, widths):
        if width > column.content_width:
            column.content_width = width
            grew = grew or column.width is None
    return grew


class TableRows:
    """The rows (keys, top to bottom), measured when asked: a row's cell widths are kept until `invalidate` says
    the row changed, its cells (as `source(key)` gives them) only for the CELL_CACHE rows drawn last:
    the model has the rows already, and 2,000 rows of Text objects cost the event loop a 37 ms garbage collection.
    `unmeasured` are the shown rows whose widths are missing or stale; the columns' widths are those of the
    shown rows measured so far."""

    def __init__(self, source: RowSource) -> None:
        self.source = source
        self.columns: list[Column] = []
        self.keys: list[str] = []
        self.index: dict[str, int] = {}
        self.unmeasured: dict[str, None] = {}         # an ordered set
        self._widths: dict[str, tuple[int, ...]] = {}
        self._cells: OrderedDict[str, tuple[Cell, ...]] = OrderedDict()     # least recently used first
        #: work done, for tests and benchmarks: rows measured, shown rows whose cells changed when measured again
        self.rows_measured = 0
        self.row_updates = 0

    @property
    def width(self) -> int:
        return sum(c.render_width for c in self.columns)

    def set_columns(self, columns: Sequence[tuple[str, str]], widths: Mapping[str, int]) -> None:
        self.columns = [Column(key, Text(label), widths.get(key)) for key, label in columns]
        self._widths.clear()
        self._cells.clear()
        self.unmeasured = dict.fromkeys(self.keys)

    def set_labels(self, labels: Mapping[str, str]) -> bool:
        """New header labels; whether any changed."""
        changed = False
        for column in self.columns:
            if column.key in labels and labels[column.key] != column.label.plain:
                column.relabel(Text(labels[column.key]))
                changed = True
        return changed

    def set_rows(self, keys: Iterable[str]) -> None:
        """New rows; the column widths become those of these rows that are measured (the rest: when measured)."""
        stale = self.unmeasured
        self.keys = list(keys)
        self.index = {key: i for i, key in enumerate(self.keys)}
        for key in stale:
            if key not in self.index:          # a stale row no longer shown: measured again when shown again
                self._forget(key)
        for column in self.columns:
            column.reset_width()
        known = [self._widths[k] for k in self.keys if k in self._widths]
        if known:
            grow(self.columns, (max(widths) for widths in zip(*known)))
        self.unmeasured = {k: None for k in self.keys if k not in self._widths or k in stale}

    def invalidate(self, key: str) -> None:
        """The row's cells changed: a shown row waits to be measured again, another one is forgotten."""
        if key in self.index:
            self.unmeasured[key] = None
        else:
            self._forget(key)

    def _forget(self, key: str) -> None:
        self._widths.pop(key, None)
        self._cells.pop(key, None)

    def measure(self, key: str, keep: bool = True) -> tuple[bool, bool]:
        """Compute a row's cells, kept for drawing when `keep` (a row measured for its widths only is not): (whether
        a shown row may draw differently, whether a column grew)."""
        try:
            values = self.source(key)
        except KeyError:
            values = {}
        cells, widths = row_cells(self.columns, values)
        old = self._cells.pop(key, None)
        if keep:
            self._cells[key] = cells
            if len(self._cells) > CELL_CACHE:
                self._cells.popitem(last=False)
        self._widths[key] = widths
        self.unmeasured.pop(key, None)
        self.rows_measured += 1
        if key not in self.index:
            return False, False
        changed = old is None or not same_cells(old, cells)
        self.row_updates += old is not None and changed
        return changed, grow(self.columns, widths)

    @property
    def kept(self) -> int:
        """Rows whose cells are held."""
        return len(self._cells)

    def needs_measuring(self, key: str) -> bool:
        return key not in self._widths or key in self.unmeasured

    def cells(self, key: str) -> tuple[Cell, ...]:
        """The row's cells as last measured (made again when they left the cache)."""
        cells = self._cells.get(key)
        if cells is None:
            self.measure(key)
            return self._cells[key]
        self._cells.move_to_end(key)
        return cells

    def next_unmeasured(self, n: int) -> list[str]:
        return list(islice(self.unmeasured, n))


def line_segments(console: Console, columns: Sequence[Column], texts: Sequence[Cell], style: Style,
                  post: Style | None, fill: int) -> list[Segment]:
    """One line: every cell padded to its column, in `style` under the cell's styles and `post` over them, and
    `fill` blank cells after the last column (in `style`), so a row's colour reaches the widget's edge."""
    pad = " " * CELL_PADDING
    out: list[Segment] = []
    append = out.append
    for column, cell in zip(columns, texts):
        width = column.text_width
        if isinstance(cell, str):
            if cell_len(cell) > width:
                cell = Text(cell)           # elided below
            else:
                append(Segment(pad + cell + pad + " " * (width - cell_len(cell)), style + post if post else style))
                continue
        text = cell
        if text.cell_len > width:
            text = text.copy()
            text.truncate(width, overflow="ellipsis")
        append(Segment(pad, style))
        # the cell's own style over the row's (Text.render leaves the base style to its caller), then its spans
        base = style + console.get_style(text.style, default=Style.null()) if text.style else style
        if text.spans:
            for seg in text.render(console, end=""):
                seg_style = base + seg.style if seg.style else base
                append(Segment(seg.text, seg_style + post if post else seg_style))
        elif text.plain:
            append(Segment(text.plain, base + post if post else base))
        append(Segment(pad + " " * (width - text.cell_len), style))
    if fill > 0:
        append(Segment(" " * fill, style))
    return out


def column_at(columns: Sequence[Column], x: int) -> int | None:
    """The index of the column under x (cells from the table's left edge), None right of the last one."""
    edge = 0
    for i, column in enumerate(columns):
        edge += column.render_width
        if x < edge:
            return i
    return None
