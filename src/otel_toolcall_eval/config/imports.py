"""Import an object the config names by ``package.module:name`` (a pydantic model, a function, a factory).

The config file is trusted (the operator writes it); trace data and datasets never reach this.
"""

from __future__ import annotations

import importlib
from typing import Any


def import_object(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    if not attr:
        raise ValueError(f"'{ref}' must look like 'package.module:name'")
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as exc:
        raise ValueError(f"cannot import module '{module}': {exc}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"module '{module}' has no attribute '{attr}'")
        obj = getattr(obj, part)
    return obj
