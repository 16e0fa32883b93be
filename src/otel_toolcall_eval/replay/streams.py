"""Bounded reading of untrusted recorded-trace files: lines and length-prefixed messages one at a time, and
zstd decompression with a limit on its output and a check that the last frame is complete.

Nothing here holds more than one record (``max_record_bytes``) plus one decompression step (~4 MiB at most)
at a time, so a 200 MB file costs its largest record, not five times its size, and a 64 KiB zstd bomb stops at
``max_decompressed_bytes`` instead of inflating to 2 GiB. A truncated zstd file is an error: zstandard's
stream reader would silently return what it had, and the replay would report 0 spans with exit 0.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# Compressed input fed to zstd per step: zstd inflates at most ~32,000x (a run-length block), so one step
# yields at most ~4 MiB however hostile the input, and the limit is checked after every step. (2 KiB steps
# made a bomb's first step 64 MiB and 250 ms before any check; the call per 128 bytes costs ~2% of decoding
# what an ordinary compressed recording inflates to.)
_STEP = 128


@dataclass(frozen=True, slots=True)
class ReadLimits:
    """How much one file may make the reader hold or produce (``--max-record-size``, ``--max-decompressed``)."""

    max_record_bytes: int = 256 << 20  # one JSON line, one protobuf message, or a whole-file JSON document
    max_decompressed_bytes: int = 1 << 30  # everything a zstd file inflates to, in total
    # records in a row that hold no span (blank lines, empty protobuf messages, records skipped as bad): past
    # this many the file is not a trace file. Without it, zero bytes read as an endless run of empty
    # length-prefixed messages, and a zstd bomb of them costs a decode per 4 bytes before its limit.
    max_empty_records: int = 10_000


class StreamError(Exception):
    """The file as a whole cannot be read on (corrupt or truncated compression, broken framing)."""

    def __init__(self, message: str, *, framing: bool = False) -> None:
        super().__init__(message)
        self.framing = framing  # the length-prefixed framing itself is broken (not a framed file at all?)


class RecordTooLarge(Exception):
    """One record is over ``max_record_bytes``; the stream is positioned after it, so reading can go on."""


def size_text(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n:,} bytes"


def too_large(limits: ReadLimits) -> str:
    return f"a record larger than the {size_text(limits.max_record_bytes)} limit (--max-record-size)"


def _zstandard() -> Any:
    try:
        import zstandard
    except ImportError:
        raise StreamError(
            "zstd-compressed; reading it needs the zstandard package: pip install 'otel-toolcall-eval[zstd]'"
        ) from None
    return zstandard


class Budget:
    """The decompressed bytes one file may still produce."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def spend(self, n: int) -> None:
        self.used += n
        if self.used > self.limit:
            raise StreamError(f"zstd data inflates past the {size_text(self.limit)} limit (--max-decompressed)")


class _Frames:
    """Incremental zstd decompression over consecutive frames, counting output against a budget."""

    def __init__(self, budget: Budget) -> None:
        self._zstd = _zstandard()
        self._budget = budget
        self._obj = self._zstd.ZstdDecompressor().decompressobj()
        self.inside = False  # input was fed to a frame that has not ended yet

    def feed(self, data: bytes) -> list[bytes]:
        out = []
        while data:
            try:
                chunk = self._obj.decompress(data)
            except self._zstd.ZstdError as exc:
                raise StreamError(f"corrupt zstd data: {exc}") from None
            self.inside = True
            self._budget.spend(len(chunk))
            if chunk:
                out.append(chunk)
            data = b""
            if self._obj.eof:  # a frame ended: what follows is the next frame
                data = self._obj.unused_data
                self._obj = self._zstd.ZstdDecompressor().decompressobj()
                self.inside = False
        return out

    def finish(self) -> None:
        if self.inside:
            raise StreamError("truncated zstd data: the file ends inside a frame")


def inflate(data: bytes, budget: Budget, limits: ReadLimits) -> bytes:
    """One length-prefixed message's zstd frame(s), whole (the message is one record)."""
    frames = _Frames(budget)
    parts: list[bytes] = []
    size = 0
    for offset in range(0, len(data), _STEP):
        for chunk in frames.feed(data[offset : offset + _STEP]):
            size += len(chunk)
            if size > limits.max_record_bytes:
                raise RecordTooLarge(too_large(limits))
            parts.append(chunk)
    frames.finish()
    return b"".join(parts)


class _Inflating(io.RawIOBase):
    """A zstd stream (the ``nativeCompression`` layout: one stream over the file) as a readable raw stream."""

    def __init__(self, source: IO[bytes], budget: Budget) -> None:
        self._source = source
        self._frames = _Frames(budget)
        self._pending = memoryview(b"")
        self._queue: list[bytes] = []
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            if self._queue:
                self._pending = memoryview(self._queue.pop(0))
                continue
            if self._done:
                return 0
            data = self._source.read(_STEP)
            if not data:
                self._frames.finish()
                self._done = True
                continue
            self._queue = self._frames.feed(data)
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


class _Prefixed(io.RawIOBase):
    """``head`` (already read, to detect the format) followed by the rest of ``source``."""

    def __init__(self, head: bytes, source: IO[bytes]) -> None:
        self._head = memoryview(head)
        self._source = source

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._source.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def buffered(raw: io.RawIOBase) -> io.BufferedReader:
    return io.BufferedReader(raw, buffer_size=1 << 20)


def inflating(source: IO[bytes], budget: Budget) -> io.BufferedReader:
    return buffered(_Inflating(source, budget))


def prefixed(head: bytes, source: IO[bytes]) -> io.BufferedReader:
    return buffered(_Prefixed(head, source))


def lines(stream: IO[bytes], limits: ReadLimits) -> Iterator[tuple[int, bytes | None]]:
    """``(line number, line)`` of every line; ``None`` for a line over the record limit (skipped to its end)."""
    limit = limits.max_record_bytes
    number = 0
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        number += 1
        if len(line) > limit and not (len(line) == limit + 1 and line.endswith(b"\n")):
            while line and not line.endswith(b"\n"):
                line = stream.readline(1 << 20)
            yield number, None
            continue
        yield number, line


def messages(stream: IO[bytes], limits: ReadLimits) -> Iterator[tuple[int, int, bytes]]:
    """``(index, byte offset, body)`` of each message of the Collector file exporter's framing (a 4-byte
    big-endian length before each). A length over the record limit or past the end is a ``StreamError``: the
    framing cannot be trusted after it."""
    offset = 0
    index = 0
    while True:
        head = stream.read(4)
        if not head:
            return
        index += 1
        if len(head) < 4:
            raise StreamError(f"truncated length prefix at byte {offset}", framing=True)
        size = int.from_bytes(head, "big")
        if size > limits.max_record_bytes:
            raise StreamError(f"message {index} (byte {offset}): {too_large(limits)} (it claims {size:,} bytes)")
        body = stream.read(size)
        if len(body) < size:
            raise StreamError(
                f"message {index} at byte {offset} claims {size:,} bytes, only {len(body):,} remain", framing=True
            )
        yield index, offset, body
        offset += 4 + size
