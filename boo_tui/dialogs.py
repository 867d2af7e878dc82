"""Small modal dialogs: one line of input with inline validation.

A dialog never does the work itself: it validates (parsing a command, checking a path exists; on the UI thread
when that is cheap, in a thread worker when it touches the file system more: `validate_in_thread`), shows the
one-line error under the input, and hands the accepted text back through `dismiss`; the app then does the real
work (adding jobs, reading files, exporting) on its engine thread.
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, RadioButton, RadioSet, Static

from .messages import Deferred, TuneRequest

Validator = Callable[[str], "str | None"]   # text -> error message, or None when acceptable


class PromptDialog(ModalScreen["str | None"]):
    """Ask for one line of text; Enter accepts it when `validate` returns no error, Escape cancels."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, *, placeholder: str = "", hint: str = "", value: str = "",
                 validate: Validator | None = None, validate_in_thread: bool = False,
                 dialog_id: str = "prompt") -> None:
        super().__init__(id=dialog_id)
        self.title_text = title
        self.placeholder = placeholder
        self.hint = hint
        self.initial = value
        self.validate = validate
        self.validate_in_thread = validate_in_thread

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            yield Input(value=self.initial, placeholder=self.placeholder, id="prompt-input")
            yield Static("", id="prompt-error", classes="dialog-error")
            if self.hint:
                yield Static(self.hint, classes="dialog-hint")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_one("#prompt-error", Static).update("")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if not text:
            self.show_error("empty input")
            return
        if self.validate_in_thread:
            self._validate_off_thread(text)
        else:
            self._validated(text, self._check(text))

    def _check(self, text: str) -> str | None:
        if self.validate is None:
            return None
        try:
            return self.validate(text)
        except Exception as e:  # noqa: BLE001 - a validator bug is still an inline message, not a crash
            return f"{type(e).__name__}: {e}"

    @work(thread=True, exclusive=True, group="validate")
    def _validate_off_thread(self, text: str) -> None:
        self.post_message(Deferred(self._validated, (text, self._check(text))))

    def on_deferred(self, message: Deferred) -> None:
        message.callback(*message.args)

    def _validated(self, text: str, error: str | None) -> None:
        if error:
            self.show_error(error)
            return
        if self.query_one(Input).value.strip() != text:
            return          # the text changed while it was checked: the next Enter checks the new one
        self.dismiss(text)

    def show_error(self, message: str) -> None:
        self.query_one("#prompt-error", Static).update(message)

    def action_cancel(self) -> None:
        self.dismiss(None)


# ---- validators (cheap: they run on the UI thread) ------------------------------------------------------
def validate_command(text: str) -> str | None:
    """The command parser's one-line message for a bad command (CommandError / BooError), else None."""
    from boo_engine.api import BooError, parse_invocation

    try:
        parse_invocation(text, check=False)   # syntax only (an aten:: op is resolved by the engine)
    except BooError as e:
        return str(e)
    return None


def validate_existing_file(text: str) -> str | None:
    path = Path(text).expanduser()
    if not path.exists():
        return f"{text}: no such file"
    if not path.is_file():
        return f"{text}: not a file"
    return None


def check_export(text: str) -> str | None:
    """The exporter's own check of an export path (a known format, .markdown included; a directory it can
    write in), so the dialog refuses exactly what the export would. It creates and deletes a probe file: run it
    off the UI thread (`validate_in_thread`)."""
    from boo_engine.api import BooError, check_export_path

    try:
        check_export_path(Path(text).expanduser())
    except BooError as e:
        return str(e)
    return None


def parse_variants_text(text: str) -> list:
    """Variants from what the user typed, exactly as the command line takes them: a variants file (`.toml`,
    as --variants-file) or one --variant value (`NAME=spec.mlir`, `NAME='--flag ...'`, `NAME=DIR/`). Cheap (no
    compiler run): the spec pre-flight, which runs iree-opt, happens later on the engine thread."""
    from boo_engine.api import variants as vmod

    stripped = text.strip()
    if stripped.lower().endswith(".toml") and "=" not in stripped:
        return vmod.load_variants_file(stripped)
    return [vmod.parse_variant_arg(stripped)]


def validate_variant(text: str) -> str | None:
    from boo_engine.api import BooError

    try:
        variants = parse_variants_text(text)
    except BooError as e:
        return str(e)
    for v in variants:
        for spec in v.tuning_specs:
            if not Path(spec).is_file():
                return f"variant {v.name}: tuning spec {spec}: no such file"
    return None


# ---- the tune dialog ---------------------------------------------------------------------------------------
class TuneDialog(ModalScreen["TuneRequest | None"]):
    """Ask for the tune's budget, its output folder and which commands. Enter in either input accepts when both
    are valid (the budget checked at once, the folder in a thread worker: it probes the file system); the error
    shows under the inputs."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, *, selected: str | None, shown: int, budget: int, out_dir: str) -> None:
        super().__init__(id="tune-dialog")
        self.selected = selected
        self.shown = shown
        self.budget = budget
        self.out_dir = out_dir

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Tune: search faster configurations on this machine", classes="dialog-title")
            yield Label("candidates per kernel (--budget)")
            yield Input(value=str(self.budget), id="tune-budget")
            yield Label("output folder (tuned.mlir, tuned.toml, report.md)")
            yield Input(value=self.out_dir, id="tune-out")
            with RadioSet(id="tune-scope"):
                if self.selected:
                    yield RadioButton(f"the selected command: {self.selected}", value=True, id="scope-selected")
                yield RadioButton(f"every command shown ({self.shown})", value=not self.selected, id="scope-shown")
            yield Static("", id="prompt-error", classes="dialog-error")
            yield Static("Enter starts it, Esc cancels. It measures on this machine: the dashboard's own runs wait "
                         "until it ends; closing its screen stops it (resumable with boo-tui tune --resume).",
                         classes="dialog-hint")

    def on_mount(self) -> None:
        self.query_one("#tune-budget", Input).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_one("#prompt-error", Static).update("")

    def request(self) -> TuneRequest | str:
        """The request the inputs make, or why they make none (the cheap checks)."""
        error = validate_budget(self.query_one("#tune-budget", Input).value)
        if error:
            return error
        out = self.query_one("#tune-out", Input).value.strip()
        if not out:
            return "output folder: empty"
        pressed = self.query_one("#tune-scope", RadioSet).pressed_button
        scope = "selected" if pressed is not None and pressed.id == "scope-selected" else "shown"
        return TuneRequest(int(self.query_one("#tune-budget", Input).value.strip()), out, scope)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        req = self.request()
        if isinstance(req, str):
            self.show_error(req)
        else:
            self._check_folder(req)

    @work(thread=True, exclusive=True, group="validate")
    def _check_folder(self, req: TuneRequest) -> None:
        self.post_message(Deferred(self._checked, (req, check_out_dir(req.out_dir))))

    def on_deferred(self, message: Deferred) -> None:
        message.callback(*message.args)

    def _checked(self, req: TuneRequest, error: str | None) -> None:
        if error:
            self.show_error(error)
        elif self.request() == req:    # unchanged while the folder was checked (else the next Enter checks)
            self.dismiss(req)

    def show_error(self, message: str) -> None:
        self.query_one("#prompt-error", Static).update(message)

    def action_cancel(self) -> None:
        self.dismiss(None)


def validate_budget(text: str) -> str | None:
    try:
        n = int(text.strip())
    except ValueError:
        return f"budget {text.strip()!r}: a whole number of candidates per kernel"
    return None if n >= 1 else f"budget {n}: give at least 1 candidate per kernel"


def check_out_dir(text: str) -> str | None:
    """Whether the tune can write its files into folder `text` (created if missing): a probe file is created and
    deleted in it, or in the nearest folder that exists. Touches the file system: run it off the UI thread."""
    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        return f"{text}: exists and is not a folder"
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        return f"{text}: {probe} is not a folder"
    try:
        fd, name = tempfile.mkstemp(prefix=".boo-probe-", dir=probe)
        os.close(fd)
        os.unlink(name)
    except OSError as e:
        return f"{text}: cannot write in {probe}: {e.strerror or e}"
    return None
