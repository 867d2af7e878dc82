"""How close to the limit: the machine's measured peaks (`peaks.py`, measured by `measure.py` in a process of
its own, theoretical figures from `theory.py`) and every result's roofline (`roofline.py`)."""
from __future__ import annotations

from .peaks import Peak, PeakError, Peaks, get_peaks, machine_key, take_notices
from .roofline import Roofline, roofline_us

__all__ = ["Peak", "PeakError", "Peaks", "Roofline", "get_peaks", "machine_key", "roofline_us", "take_notices"]
