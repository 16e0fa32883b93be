"""Hypothesis without its per-example deadline: a unit test never depends on machine speed (speed lives in
``make bench``), and a first example that imports a library (scipy, on the first pairing with a choice) or runs
on a loaded machine is slow without being wrong."""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("no-deadline", deadline=None)
settings.load_profile("no-deadline")
