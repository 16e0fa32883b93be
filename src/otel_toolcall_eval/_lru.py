"""A cache bounded in bytes, not only in entries: what trace data puts in it cannot grow memory without limit.

Counting entries is not a bound when the entries come from trace data: 300 traces with 1 MB tool definitions
took the definition, validator and resolution caches (512 entries each) to +3 GB. Each entry here has a cost
in bytes, an estimate its owner gives (the length of the text it was built from, times a factor for the
objects built from it); the oldest entries go once the total passes the limit. An entry larger than the
whole limit is not kept at all (built again when asked again).

Reads take no lock (a dict lookup is atomic in CPython; the hot path reads on every tool span); insertion and
eviction do. Eviction is in insertion order: a hit does not move the entry (that would need the lock on
every read), which only matters for a cache that churns anyway.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

from otel_toolcall_eval import _fork

K = TypeVar("K")
V = TypeVar("V")


class BytesBoundedCache(Generic[K, V]):
    def __init__(self, max_bytes: int, max_entries: int | None = None) -> None:
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self._init_state()
        _fork.reinit_after_fork(self)

    def _init_state(self) -> None:
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def _after_fork_in_child(self) -> None:
        self._init_state()  # the lock may have been held by a thread that does not exist in the child

    def __len__(self) -> int:
        return len(self._items)

    @property
    def bytes(self) -> int:
        """The estimated size of what the cache holds (at most ``max_bytes``)."""
        return self._bytes

    def get(self, key: K) -> V | None:
        hit = self._items.get(key)
        return None if hit is None else hit[0]

    def put(self, key: K, value: V, cost: int) -> None:
        if cost > self.max_bytes:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._items[key] = (value, cost)
            self._bytes += cost
            items = self._items
            while self._bytes > self.max_bytes or (self.max_entries is not None and len(items) > self.max_entries):
                _, (_, freed) = items.popitem(last=False)
                self._bytes -= freed

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0
