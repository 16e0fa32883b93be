"""Argparse value types shared by ``cli`` and the command modules (here, so commands never import ``cli``)."""

from __future__ import annotations

import argparse
import math


def finite(text: str) -> float:
    """An argparse type: a finite number. ``float()`` also reads ``nan`` and ``inf``, which no option means."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value
