"""What every report breaks a dataset down by: a case's slice and difficulty (names, as ``attributes`` holds).

Apart from the case models (``dataset.models`` re-exports them) so that the config, which validates a gate's
``slices.*`` and ``difficulty.*`` keys against them, neither builds the dataset's pydantic models nor loads its
readers at the processor's import.
"""

from __future__ import annotations

from enum import Enum


class Difficulty(str, Enum):
    EASY = "easy"
    MEDIUM = "medium"
    HARD = "hard"


class Slice(str, Enum):
    """The five slices every report breaks down by. A case is in exactly one (explicit, or derived)."""

    SINGLE_TOOL = "single-tool"
    MULTI_TOOL = "multi-tool"
    ORDERED_DEPENDENCY = "ordered-dependency"
    NO_TOOL_NEEDED = "no-tool-needed"
    MUST_NOT_CALL = "must-not-call"
