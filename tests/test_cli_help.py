"""--help says what the tool can do: every subcommand listed, every option explained."""
from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

import pytest

from boo_tui.cli import SUBCOMMANDS, build_parser


def _parsers() -> dict[str, argparse.ArgumentParser]:
    found = {"boo-tui": build_parser()}
    for name, (module, _) in SUBCOMMANDS.items():
        found[f"boo-tui {name}"] = importlib.import_module(module).build_parser()
    return found


def test_boo_tui_help_lists_every_subcommand_and_each_one_answers():
    text = subprocess.run([sys.executable, "-m", "boo_tui", "--help"], capture_output=True, text=True,
                          timeout=120).stdout
    for name in ("tune", "capture", "model", "peak", "compare", "merge"):
        assert f"\n  {name} " in text, text[-1500:]
    for name in SUBCOMMANDS:
        p = subprocess.run([sys.executable, "-m", "boo_tui", name, "--help"], capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 0 and f"boo-tui {name}" in p.stdout, (name, p.stderr[-500:])


@pytest.mark.parametrize("prog", list(_parsers()))
def test_every_option_has_help(prog):
    parser = _parsers()[prog]
    missing = [a.option_strings or [a.dest] for a in parser._actions
               if a.help is None and not isinstance(a, argparse._HelpAction)]
    assert not missing, f"{prog}: options without help: {missing}"
