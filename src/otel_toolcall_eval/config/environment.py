"""The configuration from ``OTEL_TOOLCALL_EVAL_*`` environment variables (zero-code enablement).

The variables are the config file's keys, validated by the same model with the same field-naming errors:

- ``OTEL_TOOLCALL_EVAL_CONFIG``: a config file (YAML or JSON), read as ``EvalConfig.load`` reads it;
- ``OTEL_TOOLCALL_EVAL_<SECTION>__<KEY>``: one key, ``__`` between the levels of the file
  (``OTEL_TOOLCALL_EVAL_POLICIES__STEP_BUDGET=8`` is ``policies: {step_budget: 8}``), its value read as a YAML
  value (``8`` a number, ``true`` a boolean, ``[delete_user, drop_table]`` a list); it wins over the file's;
- ``OTEL_TOOLCALL_EVAL_ENABLED=false``: the SDK is configured as without this package (no scoring).

An invalid value fails at start-up naming the variable and the field, e.g.
``OTEL_TOOLCALL_EVAL_POLICIES__STEP_BUDGET (policies.step_budget): Input should be a valid integer``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from otel_toolcall_eval.config import ConfigError, EvalConfig

PREFIX = "OTEL_TOOLCALL_EVAL_"
CONFIG_FILE = PREFIX + "CONFIG"
ENABLED = PREFIX + "ENABLED"
_NOT_KEYS = frozenset({CONFIG_FILE, ENABLED})
_FALSE = frozenset({"false", "0", "no", "off"})
_TRUE = frozenset({"true", "1", "yes", "on", ""})


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    value = env.get(ENABLED, "").strip().lower()
    if value in _FALSE:
        return False
    if value not in _TRUE:
        raise ConfigError(f"{ENABLED}: expected true or false, got {env[ENABLED]!r}")
    return True


def variable_of(path: str) -> str:
    """The variable of a config key: ``policies.step_budget`` -> ``OTEL_TOOLCALL_EVAL_POLICIES__STEP_BUDGET``."""
    return PREFIX + "__".join(path.split(".")).upper()


def load(environ: Mapping[str, str] | None = None) -> EvalConfig:
    """The config the variables describe (the file first, each key variable over it); ``ConfigError`` naming the
    variable and the field when it is invalid."""
    env = os.environ if environ is None else environ
    data: dict[str, Any] = {}
    source = "environment (OTEL_TOOLCALL_EVAL_*)"
    path = env.get(CONFIG_FILE)
    file_config = None
    if path:
        file_config = EvalConfig.load(path)  # the file's own errors name the file
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        source = f"{path} with the OTEL_TOOLCALL_EVAL_* variables"
    names: dict[str, str] = {}  # config path -> the variable that set it
    for name in sorted(env):
        if not name.startswith(PREFIX) or name in _NOT_KEYS:
            continue
        keys = [k.lower() for k in name[len(PREFIX) :].split("__")]
        if not all(keys):
            raise ConfigError(f"{name}: not a config key (levels are separated by one '__', none empty)")
        try:
            value = yaml.safe_load(env[name])
        except yaml.YAMLError as exc:
            raise ConfigError(f"{name}: not a YAML value: {exc}") from None
        _set(data, keys, value, name)
        names[".".join(keys)] = name
    if file_config is not None and not names:
        return file_config
    try:
        return EvalConfig.from_dict(data, source=source)
    except ConfigError as exc:
        raise ConfigError(_name_variables(str(exc), names)) from None


def _set(data: dict[str, Any], keys: list[str], value: Any, name: str) -> None:
    node = data
    for key in keys[:-1]:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{name}: {'.'.join(keys)}: {key} is not a section")
        node = child
    node[keys[-1]] = value


def _name_variables(message: str, names: Mapping[str, str]) -> str:
    """Each error line of a field a variable set names that variable: ``  policies.step_budget: ...`` becomes
    ``  OTEL_TOOLCALL_EVAL_POLICIES__STEP_BUDGET (policies.step_budget): ...``."""
    lines = []
    for line in message.splitlines():
        stripped = line.lstrip()
        field, sep, rest = stripped.partition(": ")
        owner = next((v for p, v in names.items() if field == p or field.startswith(p + ".")), None)
        if sep and owner is not None:
            line = f"{line[: len(line) - len(stripped)]}{owner} ({field}): {rest}"
        lines.append(line)
    return "\n".join(lines)
