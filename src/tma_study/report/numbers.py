"""Numbers and names as the paper's text writes them: the values of the LaTeX macros a study's
``macros`` entry point returns (``tma_study.paper.macros`` collects and checks them), and the
macro names, letters only. A value that cannot be printed (NaN, infinity) stops the build here."""
from __future__ import annotations

import math
import re

from tma_study.report.tables import human_bytes


class MacroError(ValueError):
    """A macro name or value is unusable; the message names it and its source."""


def number(value: float, digits: int = 0) -> str:
    """4087.02 -> '4087' (digits=0); rejects NaN so no 'nan' reaches the paper."""
    value = float(value)
    if not math.isfinite(value):
        raise MacroError(f"not a finite number: {value}")
    return f"{value:.{digits}f}"


def percent(fraction: float, digits: int = 1) -> str:
    """0.9808 -> '98.1' (the text writes the % sign)."""
    return number(100 * float(fraction), digits)


def ratio(value: float, digits: int = 2) -> str:
    return number(value, digits)


def size(n_bytes) -> str:
    """1024 -> '1 KiB' (a non-breaking space in LaTeX)."""
    value = float(n_bytes)
    if not math.isfinite(value):
        raise MacroError(f"not a finite size: {n_bytes}")
    return human_bytes(int(value))


def camel(*words: str) -> str:
    """camel('crossover', 'peak', 'cp_async', 'l2') -> 'crossoverPeakCpAsyncLtwo' (no digits)."""
    digits = {"0": "zero", "1": "one", "2": "two", "3": "three", "4": "four", "5": "five", "6": "six",
              "7": "seven", "8": "eight", "9": "nine"}
    parts = []
    for word in words:
        for piece in re.split(r"[^A-Za-z0-9]+", str(word)):
            piece = re.sub(r"\d", lambda m: digits[m.group()], piece)
            if piece:
                parts.append(piece[0].upper() + piece[1:])
    name = "".join(parts)
    return name[0].lower() + name[1:] if name else name
