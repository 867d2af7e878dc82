"""Small modal dialogs: one line of input with inline validation.

A dialog never does the work itself: it validates (parsing a command, checking a path exists; on the UI thread
when that is cheap, in a thread worker when it touches the file system more: `validate_in_thread`), shows the
one-line error under the input, and hands the accepted text back through `dismiss`; the app then does the real
work (adding jobs, reading files, exporting) on its engine thread.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from .messages import Deferred

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
    from boo_engine.commands import parse_invocation
    from boo_engine.errors import BooError

    try:
        parse_invocation(text)
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
    from boo_engine.errors import BooError
    from boo_engine.exporters import check_export_path

    try:
        check_export_path(Path(text).expanduser())
    except BooError as e:
        return str(e)
    return None


def parse_variants_text(text: str) -> list:
    """Variants from what the user typed, exactly as the command line takes them: a variants file (`.toml`,
    as --variants-file) or one --variant value (`NAME=spec.mlir`, `NAME='--flag ...'`, `NAME=DIR/`). Cheap (no
    compiler run): the spec pre-flight, which runs iree-opt, happens later on the engine thread."""
    from boo_engine import variants as vmod

    stripped = text.strip()
    if stripped.lower().endswith(".toml") and "=" not in stripped:
        return vmod.load_variants_file(stripped)
    return [vmod.parse_variant_arg(stripped)]


def validate_variant(text: str) -> str | None:
    from boo_engine.errors import BooError

    try:
        variants = parse_variants_text(text)
    except BooError as e:
        return str(e)
    for v in variants:
        for spec in v.tuning_specs:
            if not Path(spec).is_file():
                return f"variant {v.name}: tuning spec {spec}: no such file"
    return None
