"""Screens beside the live dashboard: run history, two saved runs side by side, and variants compared.

Every database read and every statistics computation (bootstrap CIs cost tens of milliseconds per command)
runs in a thread worker; results come back with `Deferred` messages, so the event loop keeps ticking.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import math
from typing import Any, Callable, Iterable

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from boo_engine.results import JobResult

from .bridge import Deferred
from .plots import PlotView, Series


def field_of(obj: Any, *names: str, default: Any = None) -> Any:
    """The first present attribute or key among `names`: store rows may be dicts or dataclasses."""
    for name in names:
        if isinstance(obj, dict) and name in obj:
            return obj[name]
        if hasattr(obj, name):
            return getattr(obj, name)
    return default


def fmt_time(value: Any) -> str:
    if isinstance(value, (int, float)) and value > 1e9:
        return _dt.datetime.fromtimestamp(value).strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, str) and len(value) >= 19 and value[10] == "T":   # ISO 8601 from the store, UTC
        return value[:19].replace("T", " ")
    return "-" if value is None else str(value)


def ratio_text(ratio: float | None, verdict: str | None = None) -> Text:
    """A variant/baseline latency ratio (< 1 faster): green when faster, red when slower, dim when the same
    or undecided. With a verdict the colour follows the statistics, not just the point estimate."""
    if ratio is None or not math.isfinite(ratio):
        return Text("-", style="dim")
    if verdict is not None:
        style = {"faster": "bold green", "slower": "bold red"}.get(verdict, "dim")
    else:
        style = "dim" if abs(ratio - 1) < 0.03 else ("green" if ratio < 1 else "red")
    return Text(f"{ratio:.3f}", style=style)


class _WorkerScreen(Screen):
    """A screen whose thread workers report back through Deferred messages (never blocking the loop)."""

    def on_deferred(self, message: Deferred) -> None:
        try:
            message.callback(*message.args)
        except Exception as e:  # noqa: BLE001
            self.notify(f"{type(e).__name__}: {e}", severity="error")

    def _call_in_thread(self, fn: Callable[..., Any], *args: Any, then: Callable[[Any], None]) -> None:
        self._thread_call(fn, args, then)

    @work(thread=True, group="screen-io")
    def _thread_call(self, fn: Callable[..., Any], args: tuple, then: Callable[[Any], None]) -> None:
        try:
            value = fn(*args)
        except Exception as e:  # noqa: BLE001 - shown in the UI, never as a traceback
            self.post_message(Deferred(self.notify, f"{e}", "error"))
            return
        self.post_message(Deferred(then, value))

    def notify(self, message: str, severity: str = "information", **kw: Any) -> None:  # type: ignore[override]
        self.app.notify(message, severity=severity, **kw)


# ---- history ---------------------------------------------------------------------------------------------
class HistoryScreen(_WorkerScreen):
    """Past runs from the results DB. Enter opens one; `m` marks runs, `c` compares the two marked."""

    BINDINGS = [
        Binding("escape,h", "app.pop_screen", "Back"),
        Binding("enter", "open_run", "Open", show=True),
        Binding("m", "mark", "Mark"),
        Binding("c", "compare_marked", "Compare 2 marked"),
        Binding("f5", "reload", "Reload", show=False),
    ]

    def __init__(self, store: Any) -> None:
        super().__init__(id="history")
        self.store = store
        self.runs: list[Any] = []
        self.marked: list[int] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("Past runs (newest first). Enter: open  m: mark  c: compare two marked", classes="hint")
        yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.title = "boo-tui: history"
        table = self.query_one(DataTable)
        for key, label in [("mark", " "), ("run", "run"), ("started", "started"), ("status", "status"),
                           ("target", "target"), ("jobs", "jobs"), ("command", "command line")]:
            table.add_column(label, key=key)
        self.action_reload()

    def action_reload(self) -> None:
        self._call_in_thread(lambda: list(self.store.list_runs()), then=self._show_runs)

    def _show_runs(self, runs: list[Any]) -> None:
        self.runs = sorted(runs, key=lambda r: -(field_of(r, "run_id", "id", default=0) or 0))
        table = self.query_one(DataTable)
        table.clear()
        for r in self.runs:
            rid = int(field_of(r, "run_id", "id", default=0))
            table.add_row(
                Text("*" if rid in self.marked else " ", style="bold yellow"),
                str(rid),
                fmt_time(field_of(r, "started_at", "started")),
                str(field_of(r, "status", default="-")),
                str(field_of(r, "target", default="-")),
                str(field_of(r, "n_results", "n_jobs", "total_jobs", default="-")),
                str(field_of(r, "command_line", default="") or ""),
                key=str(rid),
            )
        if not self.runs:
            self.notify("no runs in the results database yet")

    def _cursor_run(self) -> int | None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return int(key) if key is not None else None

    def action_open_run(self) -> None:
        rid = self._cursor_run()
        if rid is not None:
            self.app.push_screen(RunScreen(self.store, rid))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_run()

    def action_mark(self) -> None:
        rid = self._cursor_run()
        if rid is None:
            return
        if rid in self.marked:
            self.marked.remove(rid)
        else:
            self.marked = (self.marked + [rid])[-2:]
        table = self.query_one(DataTable)
        for r in self.runs:
            k = str(field_of(r, "run_id", "id"))
            table.update_cell(k, "mark", Text("*" if int(k) in self.marked else " ", style="bold yellow"))

    def action_compare_marked(self) -> None:
        if len(self.marked) != 2:
            self.notify("mark two runs with m first", severity="warning")
            return
        a, b = sorted(self.marked)
        self.app.push_screen(RunCompareScreen(self.store, a, b))


class RunScreen(_WorkerScreen):
    """One saved run's results, read-only."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Back")]

    def __init__(self, store: Any, run_id: int) -> None:
        super().__init__()
        self.store = store
        self.run_id = run_id

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(f"run {self.run_id}", id="run-info", classes="hint")
        yield DataTable(id="run-results", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.title = f"boo-tui: run {self.run_id}"
        table = self.query_one(DataTable)
        for key in ("op", "variant", "backend", "status", "median us", "GFLOP/s", "numerics", "noisy", "command"):
            table.add_column(key, key=key)
        self._call_in_thread(self._load, then=self._show)

    def _load(self) -> tuple[Any, list[JobResult]]:
        info = None
        try:
            info = self.store.run_info(self.run_id)
        except Exception:  # noqa: BLE001 - the results matter more than the header line
            pass
        return info, list(self.store.load_results(self.run_id))

    def _show(self, loaded: tuple[Any, list[JobResult]]) -> None:
        from .model import fmt_gflops, fmt_us

        info, results = loaded
        if info:
            self.query_one("#run-info", Static).update(
                f"run {self.run_id}  started {fmt_time(field_of(info, 'started_at'))}  "
                f"status {field_of(info, 'status', default='-')}  target {field_of(info, 'target', default='-')}  "
                f"{len(results)} results")
        table = self.query_one(DataTable)
        for r in results:
            st = r.stats
            table.add_row(r.op, r.variant, r.backend, r.status, fmt_us(st.median_us if st else None),
                          fmt_gflops(st.gflops if st else None),
                          r.numerics.verdict if r.numerics else "-", "noisy" if r.noisy else "", r.command)


class RunCompareScreen(_WorkerScreen):
    """Two saved runs of the same commands side by side: median per run and their ratio (B / A) with the
    bootstrap CI and the Mann-Whitney verdict."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Back")]

    def __init__(self, store: Any, run_a: int, run_b: int) -> None:
        super().__init__(id="run-compare")
        self.store = store
        self.run_a, self.run_b = run_a, run_b

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(f"run {self.run_b} against run {self.run_a} (ratio < 1: run {self.run_b} faster)",
                     id="compare-summary", classes="hint")
        yield DataTable(id="run-compare-table", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.title = f"boo-tui: run {self.run_a} vs run {self.run_b}"
        table = self.query_one(DataTable)
        for key, label in [("command", "command"), ("column", "variant"), ("a", f"run {self.run_a} us"),
                           ("b", f"run {self.run_b} us"), ("ratio", "ratio"), ("ci", "95% CI"),
                           ("verdict", "verdict")]:
            table.add_column(label, key=key)
        self._call_in_thread(self._compute, then=self._show)

    def _compute(self) -> list[tuple[Any, ...]]:
        from boo_engine.compare import column_label, compare_samples

        a = {(r.target, r.command, column_label(r)): r for r in self.store.load_results(self.run_a)
             if r.status == "done" and r.samples_us}
        b = {(r.target, r.command, column_label(r)): r for r in self.store.load_results(self.run_b)
             if r.status == "done" and r.samples_us}
        rows = []
        for key in [k for k in a if k in b]:
            ra, rb = a[key], b[key]
            c = compare_samples(ra.samples_us, rb.samples_us)
            rows.append((key, ra, rb, c))
        return rows

    def _show(self, rows: list[tuple[Any, ...]]) -> None:
        from boo_engine.compare import geomean

        from .model import fmt_us

        table = self.query_one(DataTable)
        for (target, command, label), ra, rb, c in rows:
            table.add_row(command, label, fmt_us(c.baseline_median_us), fmt_us(c.variant_median_us),
                          ratio_text(c.ratio, c.verdict), f"{c.ci_low:.3f}-{c.ci_high:.3f}", c.verdict)
        if rows:
            g = geomean(c.ratio for *_, c in rows)
            self.query_one("#compare-summary", Static).update(
                f"run {self.run_b} against run {self.run_a}: {len(rows)} common results, geomean ratio {g:.3f} "
                f"(< 1: run {self.run_b} faster)")
        else:
            self.query_one("#compare-summary", Static).update(
                f"runs {self.run_a} and {self.run_b} have no finished results in common")


# ---- variants compared (issue 6) -----------------------------------------------------------------------
class CompareScreen(_WorkerScreen):
    """Commands x variants: each cell the latency ratio against the baseline IREE kernel (< 1 faster), green
    when significantly faster, red when significantly slower, dim when the same; below, the variants'
    histograms overlaid for the selected command."""

    BINDINGS = [Binding("escape,m", "app.pop_screen", "Back")]

    #: how often an open compare screen looks for newly finished results (it follows a running session)
    POLL_S = 1.0

    def __init__(self, results: Iterable[JobResult],
                 source: Callable[[], Iterable[JobResult]] | None = None) -> None:
        """`results` to show; `source` (optional) gives the current results again: the screen then keeps up
        with a run that is still going."""
        super().__init__(id="compare")
        self.results = [r for r in results]
        self.source = source
        self.commands: list[str] = []
        self.labels: list[str] = []
        self._shown_state: tuple = ()
        self._generation = 0

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("latency ratio vs baseline (< 1 faster); computing statistics...", id="compare-summary",
                     classes="hint")
        with Vertical(id="compare-body"):
            yield DataTable(id="compare-table", cursor_type="row", zebra_stripes=True)
            yield PlotView("histogram", id="compare-hist", empty="select a command with finished results")
        yield Footer()

    def on_mount(self) -> None:
        self.title = "boo-tui: variants compared"
        self._fill()
        if self.source is not None:
            self.set_interval(self.POLL_S, self._poll)

    @staticmethod
    def _state(results: list[JobResult]) -> tuple:
        return tuple((r.job_id, r.status, r.stats.median_us if r.stats else None) for r in results)

    def _poll(self) -> None:
        fresh = [r for r in self.source()] if self.source is not None else self.results
        if self._state(fresh) != self._shown_state:
            self.results = fresh
            self._fill()

    def _fill(self) -> None:
        """(Re)build the table from self.results, keep the selected command, recompute statistics off-thread."""
        from boo_engine.compare import column_label

        self._shown_state = self._state(self.results)
        self._generation += 1
        table = self.query_one(DataTable)
        selected = None
        if table.row_count:
            with contextlib.suppress(Exception):
                selected = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        finished = [r for r in self.results if r.status == "done" and r.samples_us]
        self.commands = list(dict.fromkeys(r.command for r in self.results))
        labels = list(dict.fromkeys(column_label(r) for r in self.results))
        self.labels = sorted(labels, key=lambda x: (x != "baseline", x == "torch", x))
        table.clear(columns=True)
        table.add_column("command", key="command")
        for label in self.labels:
            table.add_column(label, key=label)
        base_median = {(r.target, r.command): r.stats.median_us for r in finished
                       if column_label(r) == "baseline" and r.stats}
        cells: dict[tuple[str, str], Text] = {}
        for r in self.results:
            label = column_label(r)
            if r.status != "done" or not r.stats:
                cells[(r.command, label)] = Text(r.status, style="dim")
            elif label == "baseline":
                cells[(r.command, label)] = Text(f"{r.stats.median_us:.4g}us")
            else:
                b = base_median.get((r.target, r.command))
                cells[(r.command, label)] = ratio_text(r.stats.median_us / b if b else None)
        for cmd in self.commands:
            table.add_row(cmd, *[cells.get((cmd, lab), Text("")) for lab in self.labels], key=cmd)
        generation = self._generation
        self._call_in_thread(self._compute, finished,
                             then=lambda out: self._show_stats(out) if generation == self._generation else None)
        if selected in self.commands:
            table.move_cursor(row=self.commands.index(selected), animate=False)
            self._plot(selected)
        elif self.commands:
            self._plot(self.commands[0])

    @staticmethod
    def _compute(finished: list[JobResult]) -> dict:
        from boo_engine.compare import by_variant, compare_results, summarize

        comps = compare_results(finished)
        return {"comparisons": comps, "summary": summarize(by_variant(comps))}

    def _show_stats(self, out: dict) -> None:
        table = self.query_one(DataTable)
        for (target, command, label), c in out["comparisons"].items():
            try:
                table.update_cell(command, label, ratio_text(c.ratio, c.verdict))
            except Exception:  # noqa: BLE001 - a cell for a job that left the table meanwhile
                pass
        parts = [f"{name}: geomean {s.geomean_ratio:.3f} ({s.faster} faster, {s.slower} slower, {s.same} same)"
                 for name, s in out["summary"].items()]
        self.query_one("#compare-summary", Static).update(
            "ratio vs baseline (< 1 faster; colour = significant, p<0.05 and >=3%)  " + "  ".join(parts))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is not None and event.row_key.value:
            self._plot(event.row_key.value)

    def _plot(self, command: str) -> None:
        from boo_engine.compare import column_label

        series = [Series(column_label(r), tuple(r.samples_us)) for r in self.results
                  if r.command == command and r.samples_us]
        self.query_one(PlotView).set_series(series, title="")
