"""Output files written whole or not at all: a temporary file beside the target, renamed over it at the end.

A report or dataset that fails half-way (a bad row, a full disk, Ctrl-C) never leaves a truncated file where the
last good one was, and ``harvest`` can stage its two outputs and rename both only once both are written.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

from otel_toolcall_eval.errors import OutputError


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


class StagedFile:
    """``path``'s next content, in a temporary file of the same directory until ``commit``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
            os.close(fd)
            os.chmod(tmp, 0o666 & ~_umask())  # what ``open(path, "w")`` would have created, not mkstemp's 0600
        except OSError as exc:
            raise OutputError(self.path, exc) from None
        self.tmp = Path(tmp)

    def open(self, mode: str = "w") -> IO[Any]:
        """``w`` (UTF-8 text, no newline translation) or ``wb``; ``a``/``ab`` after ``copy_existing``."""
        try:
            if "b" in mode:
                return open(self.tmp, mode)
            return open(self.tmp, mode, encoding="utf-8", newline="")
        except OSError as exc:
            raise OutputError(self.path, exc) from None

    def copy_existing(self) -> None:
        """Start from the target's current content (for outputs that are appended to)."""
        try:
            with open(self.path, "rb") as source, open(self.tmp, "wb") as target:
                while block := source.read(1 << 20):
                    target.write(block)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise OutputError(self.path, exc) from None

    def commit(self) -> None:
        try:
            os.replace(self.tmp, self.path)
        except OSError as exc:
            self.discard()
            raise OutputError(self.path, exc) from None

    def discard(self) -> None:
        with suppress(OSError):
            self.tmp.unlink(missing_ok=True)


@contextmanager
def _staged(path: str | Path) -> Iterator[StagedFile]:
    """A ``StagedFile`` renamed over ``path`` when the block finishes without an exception, discarded otherwise;
    an ``OSError`` becomes the ``OutputError`` that names the file."""
    staged = StagedFile(path)
    try:
        yield staged
    except OSError as exc:
        staged.discard()
        raise OutputError(path, exc) from None
    except BaseException:
        staged.discard()
        raise
    staged.commit()


@contextmanager
def write_atomically(path: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Yield a handle; the target is replaced only when the block finishes without an exception."""
    with _staged(path) as staged, staged.open(mode) as handle:
        yield handle


def write_via(path: str | Path, writer: Callable[[Path], object]) -> None:
    """Run ``writer`` on a temporary path and rename the result over ``path`` (for writers that open the file)."""
    with _staged(path) as staged:
        writer(staged.tmp)


def append_blob(path: str | Path, blob: bytes, *, sync: bool) -> None:
    """Append ``blob`` in one ``write`` on an ``O_APPEND`` descriptor (so processes on one host can share the
    file line by line), then ``fsync`` when ``sync``. Raises ``OSError``."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, blob)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def append_durably(path: str | Path, blob: bytes) -> None:
    """``append_blob`` with ``fsync``: a label or record written by a person's action survives a crash; an
    ``OutputError`` naming the file on failure."""
    try:
        append_blob(path, blob, sync=True)
    except OSError as exc:
        raise OutputError(path, exc) from None
