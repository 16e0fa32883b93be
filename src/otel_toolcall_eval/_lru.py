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
from collections.abc import Callable
from typing import Generic, TypeVar

from mypy_extensions import mypyc_attr

from otel_toolcall_eval import _fork

K = TypeVar("K")
V = TypeVar("V")


@mypyc_attr(native_class=False)
class BytesBoundedCache(Generic[K, V]):
    def __init__(self, max_bytes: int, max_entries: int | None = None) -> None:
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self._init_state()
        _fork.reinit_after_fork(self)

    def _init_state(self) -> None:
        self._values: dict[K, V] = {}
        self._costs: OrderedDict[K, int] = OrderedDict()  # insertion order: the eviction order
        self._bytes = 0
        self._lock = threading.Lock()
        # the read is the dict's own ``get`` (no Python frame: the hot path reads on every tool span)
        self.get: Callable[[K], V | None] = self._values.get

    def _after_fork_in_child(self) -> None:
        self._init_state()  # the lock may have been held by a thread that does not exist in the child

    def __len__(self) -> int:
        return len(self._values)

    @property
    def bytes(self) -> int:
        """The estimated size of what the cache holds (at most ``max_bytes``)."""
        return self._bytes

    def put(self, key: K, value: V, cost: int) -> None:
        if cost > self.max_bytes:
            return
        with self._lock:
            costs = self._costs
            old = costs.pop(key, None)
            if old is not None:
                self._bytes -= old
            costs[key] = cost
            self._values[key] = value
            self._bytes += cost
            while self._bytes > self.max_bytes or (self.max_entries is not None and len(costs) > self.max_entries):
                evicted, freed = costs.popitem(last=False)
                self._values.pop(evicted, None)
                self._bytes -= freed

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
            self._costs.clear()
            self._bytes = 0


def pop_expired(items: OrderedDict[K, V], deadline: float, stamp: Callable[[V], float]) -> list[tuple[K, V]]:
    """Remove and return the entries at the front of ``items`` whose ``stamp`` is at or before ``deadline``.

    The one expiry loop of every time-bounded table (traces past their TTL, roots past their grace window, held
    spans past their hold time, idle sessions): each keeps its entries in order of that time (insertion or last
    use), so the expired ones sit at the front and the loop stops at the first live one. Called under the
    owner's lock; the owner then lets what expired go outside it."""
    out: list[tuple[K, V]] = []
    while items:
        key, value = next(iter(items.items()))
        if stamp(value) > deadline:
            break
        del items[key]
        out.append((key, value))
    return out
