"""Helpers for the dashboard tests that drive the real app with Textual's pilot: a helper module, not a test module
(pytest does not collect it), imported by test_tui.py, test_tui_tune.py and test_tui_weights.py."""
from __future__ import annotations

import time


async def wait_until(pilot, condition, timeout: float, what: str) -> None:
    """Let the app run until `condition()` holds; AssertionError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await pilot.pause(0.05)
