"""One MIOpenDriver command line -> `Command` (the kernel's signature plus the timing args stripped from it)."""
from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from boo_engine.commands.aten import aten_text
from boo_engine.commands.driver_flags import split_driver_args
from boo_engine.commands.registry import parse_op_tokens, tokenize
from boo_engine.commands.split import split_words
from boo_engine.errors import CommandError
from boo_engine.ops.base import OpSignature


@dataclass(frozen=True)
class Command:
    """One parsed command line: the kernel it describes plus the timing args that were stripped from it.

    `text` is the command without timing args (and without a leading `MIOpenDriver`), shell-quoted: what BOO
    prints and what goes in the `arguments` column of exports. `tokens` are the same words, unquoted (split from
    `text` when asked: a session holds one Command per distinct line, and its words were ~600 bytes of each).
    `iters` is MIOpenDriver's `--iter`/`-i` (the default measuring goal). `time` is MIOpenDriver's `-t/--time`
    (0 or 1: whether MIOpenDriver prints kernel times): accepted for compatibility and otherwise IGNORED, since
    boo-tui always times every kernel. `verify` is MIOpenDriver's `-V` (None: not given; 1: check this command's
    numerics even where numerics are off or opt-in; 0: nothing, since it is MIOpenDriver's default that the user
    did not ask for). `ignored_flags`: MIOpenDriver flags given that change nothing here (`-w`, `-s`, ...), as
    typed; front ends say so once per run.
    `calls` / `share` / `captured_us`: the command's weight in the model it was captured from, from the
    `# boo-tui: calls=N share=P% us=T` line before it in a commands file (`files.py`): how many times the model
    called the kernel (>= 1), its share of the capture's compute total in percent, and those calls' time in the
    capture (microseconds; None in a file that gives none). None when the file gives no weight.
    """

    signature: OpSignature
    text: str
    iters: int = 100
    time: int = 1
    verify: int | None = None
    ignored_flags: tuple[str, ...] = ()
    calls: int | None = None
    share: float | None = None
    captured_us: float | None = None

    @property
    def tokens(self) -> tuple[str, ...]:
        """The command's words, unquoted (`text` is them shell-quoted, or BOO's double-quoted aten line)."""
        return tuple(split_words(self.text))


def parse_invocation(cmd: str | Sequence[str], *, check: bool = True) -> Command:
    """Parse a full command line, timing args included.

    `check=True` also runs the signature's deeper checks (`OpSignature.check`: for an `aten::` line, that torch
    has the op and an overload takes the recorded arguments, which imports torch). `check=False` is syntax
    only and never imports torch: what a dashboard labelling rows on its own thread wants."""
    tokens = tokenize(cmd)
    driver = split_driver_args(tokens)
    rest = driver.rest
    if not rest:
        raise CommandError("command has no op (only timing args)")
    signature = parse_op_tokens(rest)
    if check:
        signature.check()
    text = aten_text(rest) or _join(rest)
    return Command(signature=signature, text=text, iters=driver.iters,
                   time=driver.time, verify=driver.verify, ignored_flags=driver.ignored)


#: a character shlex.quote would quote (its own test, plus the space that joins the words)
_NEEDS_QUOTES = re.compile(r"[^\w@%+=:,./ -]", re.ASCII)


def _join(words: Sequence[str]) -> str:
    """`shlex.join(words)`, at once for the usual command (no word empty or needing quotes)."""
    text = " ".join(words)
    if _NEEDS_QUOTES.search(text) is None and text.count(" ") == len(words) - 1 and "" not in words:
        return text
    return shlex.join(words)


def parse_command(cmd: str | Sequence[str], *, check: bool = True) -> OpSignature:
    """Parse a command line into its kernel's signature (timing args accepted and ignored)."""
    return parse_invocation(cmd, check=check).signature
