"""What the dashboard's keys (and command palette) do. The app's `action_*` methods, which Textual's bindings
name, each call one method here.

Every action that touches the session hands the call to the engine thread (`EngineClient.call`): the UI thread
never compiles, exports, measures, runs iree-opt or writes the DB. What comes back is a typed message
(`JobsAdded`, `ExportWritten`), which the app hands to `jobs_added` / `export_written`.
"""
from __future__ import annotations

from pathlib import Path

from textual.app import App
from textual.widgets import TabbedContent

from boo_engine.api import FINAL_STATUSES, FORMATS, JobResult, Session, Status, preflight_variant

from . import dialogs
from .detail import reproducer_text
from .engine_client import EngineClient
from .messages import ExportWritten, JobsAdded
from .screens import CompareScreen, HistoryScreen, RooflineScreen
from .table_controller import TableController
from .tune_controller import TuneController


class DashboardActions:
    """The dashboard's actions, on its engine client, results table and tune."""

    def __init__(self, app: App[int], engine: EngineClient, results: TableController, tune: TuneController) -> None:
        self.app = app
        self.engine = engine
        self.results = results
        self.tune = tune

    def _session_for_a_run(self) -> Session | None:
        """The session, when a run may start now (None, said why, while the session opens or a tune measures)."""
        session = self.engine.require()
        return None if session is None or self.tune.refuse_while_tuning() else session

    # ---- running and cancelling --------------------------------------------------------------------------
    def run_all(self) -> None:
        session = self._session_for_a_run()
        if session is not None:
            if not any(v.status == Status.QUEUED for v in self.results.model.jobs.values()):
                self.app.notify("nothing queued (R re-runs the selected job)", severity="warning")
                return
            self.engine.call(session.start, what="run: ")

    def run_selected(self) -> None:
        view = self.results.selected_view()
        session = self._session_for_a_run() if view is not None else None
        if session is None or view is None:
            return
        if view.status in FINAL_STATUSES:
            self.engine.call(session.rerun, [view.job_id], what="re-run: ")
        elif view.status == Status.QUEUED:
            self.engine.call(session.start, [view.job_id], what="run: ")

    def rerun(self) -> None:
        view = self.results.selected_view()
        session = self._session_for_a_run() if view is not None else None
        if session is None or view is None:
            return
        if view.status not in FINAL_STATUSES:
            self.app.notify("the job has not finished yet", severity="warning")
            return
        self.engine.call(session.rerun, [view.job_id], what="re-run: ")

    def rerun_all(self) -> None:
        session = self._session_for_a_run()
        ids = self.results.model.finished_ids() if session is not None else []
        if session is not None and ids:
            self.engine.call(session.rerun, ids, what="re-run: ")

    def cancel(self) -> None:
        view = self.results.selected_view()
        session = self.engine.require()
        if session is not None and view is not None:
            self.engine.call(session.cancel, [view.job_id], what="cancel: ")

    def cancel_all(self) -> None:
        session = self.engine.require()
        if session is not None:
            self.engine.call(session.cancel, what="cancel: ")

    # ---- adding jobs -------------------------------------------------------------------------------------
    def add_command(self) -> None:
        session = self.engine.require()
        if session is None:
            return

        def done(text: str | None) -> None:
            if text:
                self.engine.call(session.add_command, text, reply=JobsAdded, what="add: ")

        self.app.push_screen(dialogs.PromptDialog(
            "Add a command", placeholder="conv -n 1 -c 16 -H 14 -W 14 -k 16 -y 3 -x 3 -p 1 -q 1",
            hint="MIOpenDriver syntax (conv, convbfp16, layernorm, gemm, ...). Enter adds, Esc cancels.",
            validate=dialogs.validate_command, dialog_id="add-command"), done)

    def load_file(self) -> None:
        session = self.engine.require()
        if session is None:
            return

        def done(path: str | None) -> None:
            if path:
                self.engine.call(session.add_inputs, [path], reply=JobsAdded, what=f"{path}: ")

        self.app.push_screen(dialogs.PromptDialog(
            "Load a commands file", placeholder="sample_commands.txt", hint="one command per line (.txt/.tsv)",
            validate=dialogs.validate_existing_file, dialog_id="load-file"), done)

    def add_variant(self) -> None:
        session = self.engine.require()
        if session is None:
            return

        def done(text: str | None) -> None:
            if text:
                self.engine.call(_add_variants, session, text, reply=JobsAdded, what="variant: ")

        self.app.push_screen(dialogs.PromptDialog(
            "Add a variant", placeholder="NAME=spec.mlir   or   NAME='--iree-flag=value ...'   or   variants.toml",
            hint="a tuning spec, iree-compile flags, a dispatch folder (NAME=DIR/) or a variants file; "
                 "checked with iree-opt (for this session's target) before any compile",
            validate=dialogs.validate_variant, dialog_id="add-variant"), done)

    def jobs_added(self, message: JobsAdded) -> None:
        results = list(message.results or [])
        self.results.add_results(results)
        failed = sum(1 for r in results if r.status == Status.FAILED)
        msg = f"added {len(results)} job(s)" + (f", {failed} failed to parse" if failed else "")
        self.app.notify(msg + ("" if failed == len(results) else "  (r runs them)"))

    # ---- results -----------------------------------------------------------------------------------------
    def export(self) -> None:
        session = self.engine.require()
        if session is None:
            return

        def done(text: str | None) -> None:
            if text:
                path = str(Path(text).expanduser())
                self.engine.call(session.export, path, reply=lambda _: ExportWritten(path), what="export: ")

        self.app.push_screen(dialogs.PromptDialog(
            "Export results", value="boo-results.md", hint=f"the suffix picks the format: {', '.join(FORMATS)}",
            validate=dialogs.check_export, validate_in_thread=True, dialog_id="export"), done)

    def export_written(self, message: ExportWritten) -> None:
        self.app.notify(f"wrote {message.path}")

    def history(self) -> None:
        session = self.engine.require()
        if session is not None:
            self.app.push_screen(HistoryScreen(session.store))

    def _all_results(self) -> list[JobResult]:
        return [v.result for v in self.results.model.jobs.values()]

    def compare(self) -> None:
        results = self._all_results()
        if not results:
            self.app.notify("no jobs yet", severity="warning")
            return
        self.app.push_screen(CompareScreen(results, source=self._all_results, min_effect=self.engine.config.min_effect,
                                           seed=self.engine.config.seed))

    def roofline(self) -> None:
        """The peaks are the engine's (read, never measured, here): the plot draws what the session has."""
        results = self._all_results()
        if not results:
            self.app.notify("no jobs yet", severity="warning")
            return
        session = self.engine.session
        self.app.push_screen(RooflineScreen(results, session.peaks if session is not None else None))

    def show_pane(self, pane: str) -> None:
        """One of the panes (hist, timeline, detail, log) in front: keys 1-4, Enter on a row for the detail."""
        self.app.query_one("#panes", TabbedContent).active = f"tab-{pane}"

    def copy_repro(self) -> None:
        repro = reproducer_text(self.results.selected_view())
        if not repro:
            self.app.notify("the selected job has no reproducer yet (it appears once measured)", severity="warning")
            return
        self.app.copy_to_clipboard(repro)
        self.app.notify("reproducer copied to the clipboard", timeout=3)

    def sort(self) -> None:
        label = self.results.sort_next()
        self.app.notify(f"sorted by {label} (click a header to sort; again to reverse)", timeout=2)


def _add_variants(session: Session, text: str) -> list[JobResult]:
    """Engine thread: parse, pre-flight as the command line does (iree-opt on specs, for the session's target)
    and add each variant's jobs."""
    variants = dialogs.parse_variants_text(text)
    for variant in variants:  # every one checked before any is added: a bad one adds nothing
        preflight_variant(variant, session.target)
    added: list[JobResult] = []
    for variant in variants:
        added += session.add_variant(variant)
    return added
