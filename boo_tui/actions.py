"""What the dashboard's keys (and command palette) do: the part of `BooApp` with the `action_*` methods.

Every action that touches the session hands the call to the engine thread (`_call_engine`): the UI thread never
compiles, exports, measures, runs iree-opt or writes the DB. What comes back is a typed message (`JobsAdded`,
`ExportWritten`), handled here too.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.message import Message
from textual.widgets import TabbedContent

from boo_engine.api import FINAL_STATUSES, FORMATS, JobResult, Status, preflight_variant

from . import dialogs
from .detail import reproducer_text
from .messages import ExportWritten, JobsAdded
from .run_model import JobView, RunModel
from .screens import CompareScreen, HistoryScreen, RooflineScreen

if TYPE_CHECKING:
    from textual.app import App

    _AppBase = App[int]
else:
    _AppBase = object


class ActionsMixin(_AppBase):
    """The dashboard's actions (a part of `BooApp`)."""

    session: Any
    model: RunModel

    if TYPE_CHECKING:
        @property
        def min_effect(self) -> float: ...

        @property
        def seed(self) -> int: ...

        def _require_session(self) -> bool: ...

        def _call_engine(self, fn: Callable[..., Any], *args: Any,
                         reply: Callable[[Any], Message] | None = None, what: str = "") -> None: ...

        def _selected_view(self) -> JobView | None: ...

        def _add_results(self, results: Iterable[JobResult]) -> None: ...

        def refuse_while_tuning(self) -> bool: ...

    # ---- running and cancelling --------------------------------------------------------------------------
    def action_run_all(self) -> None:
        if self._require_session() and not self.refuse_while_tuning():
            queued = [j for j, v in self.model.jobs.items() if v.status == Status.QUEUED]
            if not queued:
                self.notify("nothing queued (R re-runs the selected job)", severity="warning")
                return
            self._call_engine(self.session.start, what="run: ")

    def action_run_selected(self) -> None:
        view = self._selected_view()
        if not self._require_session() or view is None or self.refuse_while_tuning():
            return
        if view.status in FINAL_STATUSES:
            self._call_engine(self.session.rerun, [view.job_id], what="re-run: ")
        elif view.status == Status.QUEUED:
            self._call_engine(self.session.start, [view.job_id], what="run: ")

    def action_rerun(self) -> None:
        view = self._selected_view()
        if not self._require_session() or view is None or self.refuse_while_tuning():
            return
        if view.status not in FINAL_STATUSES:
            self.notify("the job has not finished yet", severity="warning")
            return
        self._call_engine(self.session.rerun, [view.job_id], what="re-run: ")

    def action_rerun_all(self) -> None:
        if self._require_session() and not self.refuse_while_tuning():
            ids = self.model.finished_ids()
            if ids:
                self._call_engine(self.session.rerun, ids, what="re-run: ")

    def action_cancel(self) -> None:
        view = self._selected_view()
        if self._require_session() and view is not None:
            self._call_engine(self.session.cancel, [view.job_id], what="cancel: ")

    def action_cancel_all(self) -> None:
        if self._require_session():
            self._call_engine(self.session.cancel, what="cancel: ")

    # ---- adding jobs -------------------------------------------------------------------------------------
    def action_add_command(self) -> None:
        if not self._require_session():
            return

        def done(text: str | None) -> None:
            if text:
                self._call_engine(self.session.add_command, text, reply=JobsAdded, what="add: ")

        self.push_screen(dialogs.PromptDialog(
            "Add a command", placeholder="conv -n 1 -c 16 -H 14 -W 14 -k 16 -y 3 -x 3 -p 1 -q 1",
            hint="MIOpenDriver syntax (conv, convbfp16, layernorm, gemm, ...). Enter adds, Esc cancels.",
            validate=dialogs.validate_command, dialog_id="add-command"), done)

    def action_load_file(self) -> None:
        if not self._require_session():
            return

        def done(path: str | None) -> None:
            if path:
                self._call_engine(self.session.add_inputs, [path], reply=JobsAdded, what=f"{path}: ")

        self.push_screen(dialogs.PromptDialog(
            "Load a commands file", placeholder="sample_commands.txt", hint="one command per line (.txt/.tsv)",
            validate=dialogs.validate_existing_file, dialog_id="load-file"), done)

    def action_add_variant(self) -> None:
        if not self._require_session():
            return

        def done(text: str | None) -> None:
            if text:
                self._call_engine(self._add_variants, text, reply=JobsAdded, what="variant: ")

        self.push_screen(dialogs.PromptDialog(
            "Add a variant", placeholder="NAME=spec.mlir   or   NAME='--iree-flag=value ...'   or   variants.toml",
            hint="a tuning spec, iree-compile flags, a dispatch folder (NAME=DIR/) or a variants file; "
                 "checked with iree-opt (for this session's target) before any compile",
            validate=dialogs.validate_variant, dialog_id="add-variant"), done)

    def _add_variants(self, text: str) -> list[JobResult]:
        """Engine thread: parse, pre-flight as the command line does (iree-opt on specs, for the session's
        target) and add each variant's jobs."""
        variants = dialogs.parse_variants_text(text)
        for variant in variants:  # every one checked before any is added: a bad one adds nothing
            preflight_variant(variant, self.session.target)
        added: list[JobResult] = []
        for variant in variants:
            added += self.session.add_variant(variant)
        return added

    def on_jobs_added(self, message: JobsAdded) -> None:
        results = list(message.results or [])
        self._add_results(results)
        failed = sum(1 for r in results if r.status == Status.FAILED)
        msg = f"added {len(results)} job(s)" + (f", {failed} failed to parse" if failed else "")
        self.notify(msg + ("" if failed == len(results) else "  (r runs them)"))

    # ---- results -----------------------------------------------------------------------------------------
    def action_export(self) -> None:
        if not self._require_session():
            return

        def done(text: str | None) -> None:
            if text:
                path = str(Path(text).expanduser())
                self._call_engine(self.session.export, path, reply=lambda _: ExportWritten(path), what="export: ")

        self.push_screen(dialogs.PromptDialog(
            "Export results", value="boo-results.md", hint=f"the suffix picks the format: {', '.join(FORMATS)}",
            validate=dialogs.check_export, validate_in_thread=True, dialog_id="export"), done)

    def on_export_written(self, message: ExportWritten) -> None:
        self.notify(f"wrote {message.path}")

    def action_history(self) -> None:
        if self._require_session():
            self.push_screen(HistoryScreen(self.session.store))

    def action_compare(self) -> None:
        results = [v.result for v in self.model.jobs.values()]
        if not results:
            self.notify("no jobs yet", severity="warning")
            return
        self.push_screen(CompareScreen(results, source=lambda: [v.result for v in self.model.jobs.values()],
                                       min_effect=self.min_effect, seed=self.seed))

    def action_roofline(self) -> None:
        """The peaks are the engine's (read, never measured, here): the plot draws what the session has."""
        results = [v.result for v in self.model.jobs.values()]
        if not results:
            self.notify("no jobs yet", severity="warning")
            return
        peaks = self.session.peaks if self.session is not None else None
        self.push_screen(RooflineScreen(results, peaks))

    def action_show_pane(self, pane: str) -> None:
        """One of the panes (hist, timeline, detail, log) in front: keys 1-4, Enter on a row for the detail."""
        self.query_one("#panes", TabbedContent).active = f"tab-{pane}"

    def action_copy_repro(self) -> None:
        repro = reproducer_text(self._selected_view())
        if not repro:
            self.notify("the selected job has no reproducer yet (it appears once measured)", severity="warning")
            return
        self.copy_to_clipboard(repro)
        self.notify("reproducer copied to the clipboard", timeout=3)
