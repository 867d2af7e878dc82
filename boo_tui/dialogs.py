"""Small modal dialogs: one line of input with inline validation.

A dialog never does the work itself: it validates cheaply on the UI thread (parsing a command, checking a path
exists), shows the one-line error under the input, and hands the accepted text back through `dismiss`; the app
then does the real work (adding jobs, reading files, exporting) in a thread worker.
"""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import Callable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

Validator = Callable[[str], "str | None"]   # text -> error message, or None when acceptable


class PromptDialog(ModalScreen["str | None"]):
    """Ask for one line of text; Enter accepts it when `validate` returns no error, Escape cancels."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, *, placeholder: str = "", hint: str = "", value: str = "",
                 validate: Validator | None = None, dialog_id: str = "prompt") -> None:
        super().__init__(id=dialog_id)
        self.title_text = title
        self.placeholder = placeholder
        self.hint = hint
        self.initial = value
        self.validate = validate

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
        error = None
        if self.validate is not None:
            try:
                error = self.validate(text)
            except Exception as e:  # noqa: BLE001 - a validator bug is still an inline message, not a crash
                error = f"{type(e).__name__}: {e}"
        if error:
            self.show_error(error)
            return
        self.dismiss(text)

    def show_error(self, message: str) -> None:
        self.query_one("#prompt-error", Static).update(message)

    def action_cancel(self) -> None:
        self.dismiss(None)


# ---- validators (cheap: they run on the UI thread) ------------------------------------------------------
def validate_command(text: str) -> str | None:
    """The command parser's one-line message for a bad command (CommandError / BooError), else None."""
    from boo_engine.errors import BooError
    from boo_engine.commands import parse_invocation

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


EXPORT_SUFFIXES = (".csv", ".json", ".md")


def validate_export_path(text: str) -> str | None:
    path = Path(text).expanduser()
    if path.suffix.lower() not in EXPORT_SUFFIXES:
        return f"{text}: the file name must end in {', '.join(EXPORT_SUFFIXES)}"
    if not path.parent.exists() and str(path.parent) not in ("", "."):
        return f"{path.parent}: no such directory"
    return None


def parse_variant_text(text: str):
    """A variant from what the user typed: a tuning spec (`.mlir`), a variants file (`.toml`), or
    `[name=]flag flag ...` compiler flags. Raises VariantError (one line) when it is not usable."""
    from boo_engine.errors import VariantError
    from boo_engine import variants as vmod

    for name in ("parse_variant", "parse_variant_arg", "parse_variant_spec"):
        fn = getattr(vmod, name, None)      # the variants module's own `--variant` parser, when it has one
        if callable(fn):
            return fn(text)
    try:
        tokens = shlex.split(text)
    except ValueError as e:
        raise VariantError(f"variant: {e}") from None
    if not tokens:
        raise VariantError("variant: empty")
    name = None
    if "=" in tokens[0] and not tokens[0].startswith("-"):
        name, first = tokens[0].split("=", 1)
        tokens = ([first] if first else []) + tokens[1:]
    specs = [str(Path(t).expanduser().resolve()) for t in tokens if t.endswith(".mlir")]
    flags = [t for t in tokens if not t.endswith(".mlir")]
    for spec in specs:
        if not Path(spec).is_file():
            raise VariantError(f"variant: tuning spec {spec} not found")
    bad = [f for f in flags if not f.startswith("-")]
    if bad:
        raise VariantError(f"variant: {bad[0]!r} is neither a .mlir tuning spec nor a compiler flag")
    if name is None:
        name = Path(specs[0]).stem if specs else "flags:" + " ".join(flags)[:40]
    return vmod.Variant(name=name, tuning_specs=tuple(specs), flags=tuple(flags))


def validate_variant(text: str) -> str | None:
    from boo_engine.errors import BooError

    try:
        parse_variant_text(text)
    except BooError as e:
        return str(e)
    return None
