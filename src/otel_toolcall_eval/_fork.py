"""One at-fork registry: every object that holds a lock or a worker re-creates them in a forked child.

``os.fork`` copies memory, not threads: a lock that the background worker (or any other thread) held at the
moment of the fork stays held forever in the child, and the child's first ``force_flush`` waits for it (seen
in 1 child in 15 in a random fork test). Each lock-holding object registers here once; one
``os.register_at_fork(after_in_child=...)`` hook calls their ``_after_fork_in_child`` in the child, before
any other code runs there. The registry holds weak references (as the OpenTelemetry SDK's
``_shared_internal`` does), so registering never keeps a processor or a cache alive.
"""

from __future__ import annotations

import logging
import os
import weakref
from typing import Protocol

logger = logging.getLogger("otel_toolcall_eval")


class ForkAware(Protocol):
    def _after_fork_in_child(self) -> None:
        """Re-create every lock, condition and worker handle, and drop state that belongs to the parent."""


_REGISTERED: weakref.WeakSet[ForkAware] = weakref.WeakSet()


def reinit_after_fork(obj: ForkAware) -> None:
    """Have ``obj._after_fork_in_child()`` run in every child forked from now on (while ``obj`` lives)."""
    _REGISTERED.add(obj)


def _after_fork_in_child() -> None:
    for obj in list(_REGISTERED):
        try:
            obj._after_fork_in_child()
        except Exception:
            logger.warning("toolcall-eval: resetting %s after fork failed", type(obj).__name__, exc_info=True)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
