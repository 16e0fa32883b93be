"""A content-addressed cache of the judge's verdicts, so an offline rerun over the same cases costs nothing.

The key is a SHA-256 of the question's fingerprint (``judge.fingerprint``: model, prompt template, scale,
redaction ...) and the exact data the question receives (redacted, cut, canonical JSON). The random nonce of the
prompt's data tag is not part of it: it changes every request and no verdict depends on it. Only verdicts are
stored (label, score, explanation, model, tokens), never errors: a timeout or a 429 must be asked again.

One small JSON file per entry under ``<dir>/<first two hex digits>/<key>.json``, written to a temporary file and
renamed, so a killed run leaves no torn entry and two runs can share a directory. Bounded: at most
``max_entries`` entries (the oldest tenth by modification time is removed when full) and each entry's text is
capped, whatever the judge answered.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any, Final

import orjson

from otel_toolcall_eval import _json

DEFAULT_MAX_ENTRIES: Final = 100_000
MAX_ENTRY_BYTES: Final = 16_384  # label, score, explanation (cut to 1,000 characters by the judge), model, usage


def cache_key(fingerprint: str, question: str, data: Any) -> str:
    """The content address of one question asked about one call's data under one judge configuration."""
    blob = "\0".join((fingerprint, question, _json.canonical(data)))
    return hashlib.sha256(blob.encode()).hexdigest()


class ResponseCache:
    """Verdicts by ``cache_key``; ``hits`` and ``misses`` count this process's look-ups."""

    def __init__(self, directory: str | Path, *, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.directory = Path(directory)
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        self.directory.mkdir(parents=True, exist_ok=True)
        self._count = sum(1 for _ in self._entries())

    def _entries(self) -> Any:
        return self.directory.glob("[0-9a-f][0-9a-f]/*.json")

    def _path(self, key: str) -> Path:
        if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
            raise ValueError(f"not a cache key: {key[:80]!r}")
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored verdict, or ``None`` (missing, unreadable, too large or not an object: asked again)."""
        path = self._path(key)
        try:
            with open(path, "rb") as handle:
                blob = handle.read(MAX_ENTRY_BYTES + 1)
            value = orjson.loads(blob) if len(blob) <= MAX_ENTRY_BYTES else None
        except (OSError, orjson.JSONDecodeError):
            value = None
        if not isinstance(value, dict):
            self.misses += 1
            return None
        self.hits += 1
        return value

    def put(self, key: str, value: dict[str, Any]) -> bool:
        """Store a verdict (atomically); ``False`` when it is too large to keep."""
        blob = orjson.dumps(value)
        if len(blob) > MAX_ENTRY_BYTES:
            return False
        path = self._path(key)
        if self._count >= self.max_entries:
            self._evict()
        path.parent.mkdir(exist_ok=True)
        existed = path.exists()
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(blob)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._count += not existed
        return True

    def __len__(self) -> int:
        return self._count

    def _evict(self) -> None:
        """Remove the oldest tenth of the entries (at least one)."""
        entries = []
        for path in self._entries():
            try:
                entries.append((path.stat().st_mtime_ns, path))
            except OSError:
                continue
        entries.sort()
        for _, path in entries[: max(1, len(entries) // 10)]:
            path.unlink(missing_ok=True)
        self._count = max(0, len(entries) - max(1, len(entries) // 10))
