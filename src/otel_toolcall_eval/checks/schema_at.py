"""A position inside a tool's JSON Schema, for the one question argument matching asks of it at any depth: does
the schema say ``number`` here? Only there are ``1`` and ``1.0`` the same argument value (``checks.argument_match``);
where it says ``integer``, or says nothing, a model that wrote ``1.0`` wrote another literal than ``1``.

Schemas are untrusted (trace data, datasets): only references inside the document (``#``, ``#/...``) are followed,
at most ``_MAX_HOPS`` of them in a row, and combinators are searched to a bounded depth, so a cyclic or deep schema
costs a bounded amount of work. Nothing here is on the hot path: the matcher asks only when two numbers of
different Python types meet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_MAX_HOPS = 8
_MAX_DEPTH = 8
_BRANCHES = ("allOf", "anyOf", "oneOf")


@dataclass(slots=True, frozen=True)
class SchemaAt:
    """``node``: the schema at this position; ``root``: the whole document, for ``$ref``."""

    node: Mapping[str, Any]
    root: Mapping[str, Any]

    @staticmethod
    def of(schema: Mapping[str, Any] | None) -> SchemaAt | None:
        """The top of a tool's parameters schema (None for none)."""
        return SchemaAt(schema, schema) if isinstance(schema, Mapping) else None

    def at_key(self, key: str) -> SchemaAt | None:
        """The schema of an object's value under ``key`` (``properties``, else ``additionalProperties``)."""
        found = _find(self.node, self.root, lambda n: _property(n, key), 0)
        return None if found is None else SchemaAt(found, self.root)

    def item(self, index: int) -> SchemaAt | None:
        """The schema of an array's element ``index`` (``prefixItems``, else ``items``)."""
        found = _find(self.node, self.root, lambda n: _item(n, index), 0)
        return None if found is None else SchemaAt(found, self.root)

    @property
    def number(self) -> bool:
        """Does the schema say ``number`` here (its ``type``, or a branch of ``anyOf``/``oneOf``/``allOf``)?"""
        return _says_number(self.node, self.root, 0)


def _resolve(node: Any, root: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``node`` with its in-document ``$ref`` followed (a bounded number of hops); None if it is no schema."""
    for _ in range(_MAX_HOPS):
        if not isinstance(node, Mapping):
            return None
        ref = node.get("$ref")
        if not isinstance(ref, str):
            return node
        node = _pointer(root, ref)
    return None


def _pointer(root: Mapping[str, Any], ref: str) -> Any:
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None  # another document: never fetched
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping):
            node = node.get(part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _find(node: Any, root: Mapping[str, Any], step: Any, depth: int) -> Mapping[str, Any] | None:
    here = _resolve(node, root)
    if here is None or depth > _MAX_DEPTH:
        return None
    found = step(here)
    if found is not None:
        return _resolve(found, root)
    for word in _BRANCHES:
        branches = here.get(word)
        if isinstance(branches, list):
            for branch in branches:
                found = _find(branch, root, step, depth + 1)
                if found is not None:
                    return found
    return None


def _property(node: Mapping[str, Any], key: str) -> Any:
    properties = node.get("properties")
    if isinstance(properties, Mapping) and key in properties:
        return properties[key]
    extra = node.get("additionalProperties")
    return extra if isinstance(extra, Mapping) else None


def _item(node: Mapping[str, Any], index: int) -> Any:
    prefix = node.get("prefixItems")
    if isinstance(prefix, list) and index < len(prefix):
        return prefix[index]
    items = node.get("items")
    if isinstance(items, list):  # draft 4-7 tuple form
        return items[index] if index < len(items) else None
    return items if isinstance(items, Mapping) else None


def _says_number(node: Any, root: Mapping[str, Any], depth: int) -> bool:
    here = _resolve(node, root)
    if here is None or depth > _MAX_DEPTH:
        return False
    kind = here.get("type")
    if kind == "number" or (isinstance(kind, list) and "number" in kind):
        return True
    for word in _BRANCHES:
        branches = here.get(word)
        if isinstance(branches, list) and any(_says_number(b, root, depth + 1) for b in branches):
            return True
    return False
