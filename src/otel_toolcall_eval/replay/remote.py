"""Fetch recorded traces from a running Jaeger or Tempo over their HTTP query APIs.

Neither API has a cursor, so results are paged by time: each page ends just before the oldest trace of the
previous one. Server errors and timeouts are retried a few times; a failure that persists, or an answer
that is not JSON, stops the walk with a clear message and keeps what was already fetched.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx
from opentelemetry.sdk.trace import ReadableSpan
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from otel_toolcall_eval.replay.jaeger import JaegerFormatError, spans_from_jaeger
from otel_toolcall_eval.replay.otlp import request_from_json, spans_from_request

Progress = Callable[[int, int], None]  # (traces fetched, traces wanted)


@dataclass
class FetchResult:
    spans: list[ReadableSpan] = field(default_factory=list)
    trace_ids: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class FetchError(RuntimeError):
    pass


class _Transient(FetchError):
    """A failure worth another attempt: a timeout, a transport error, HTTP 5xx or 429."""


def _get_json_once(client: httpx.Client, url: str, params: dict[str, Any]) -> Any:
    try:
        response = client.get(url, params=params, headers={"Accept": "application/json"})
    except httpx.TimeoutException:
        raise _Transient(f"GET {url}: timed out") from None
    except httpx.TransportError as exc:
        raise _Transient(f"GET {url}: {exc}") from None
    if response.status_code >= 500 or response.status_code == 429:
        raise _Transient(f"GET {url}: HTTP {response.status_code}")
    if response.status_code >= 400:  # the request itself is wrong: another attempt would get the same answer
        raise FetchError(f"GET {url}: HTTP {response.status_code}: {response.text[:200]}")
    try:
        return response.json()
    except ValueError:
        raise FetchError(f"GET {url}: answer is not JSON: {response.text[:120]!r}") from None


def _get_json(client: httpx.Client, url: str, params: dict[str, Any], retries: int, backoff: float) -> Any:
    """One GET, retried (tenacity, as the judge's calls) on transient failures: ``backoff``, then twice as long..."""
    retrying = Retrying(
        stop=stop_after_attempt(retries + 1),
        wait=wait_exponential(multiplier=backoff),
        retry=retry_if_exception_type(_Transient),
        reraise=True,
    )
    try:
        return retrying(_get_json_once, client, url, params)
    except _Transient as exc:
        raise FetchError(f"{exc} (after {retries + 1} attempts)") from None


def fetch_jaeger(
    base_url: str,
    service: str,
    *,
    lookback_seconds: float = 3600,
    limit: int = 100,
    page_size: int = 20,
    timeout: float = 10.0,
    retries: int = 2,
    backoff: float = 0.2,
    progress: Progress | None = None,
    now: float | None = None,
    transport: httpx.BaseTransport | None = None,
) -> FetchResult:
    """Walk ``/api/traces`` backwards from now, ``page_size`` traces at a time, until ``limit`` or the lookback."""
    result = FetchResult()
    end_us = int((now if now is not None else time.time()) * 1_000_000)
    start_us = end_us - int(lookback_seconds * 1_000_000)
    seen: set[str] = set()
    url = base_url.rstrip("/") + "/api/traces"
    with httpx.Client(timeout=timeout, transport=transport) as client:
        while len(seen) < limit and end_us > start_us:
            page = min(page_size, limit - len(seen))
            params = {"service": service, "start": start_us, "end": end_us, "limit": page}
            try:
                document = _get_json(client, url, params, retries, backoff)
                traces = document.get("data") or [] if isinstance(document, dict) else None
                if traces is None:
                    raise FetchError(f"GET {url}: expected an object with 'data'")
            except FetchError as exc:
                result.errors.append(str(exc))
                break
            oldest = end_us
            new = 0
            for trace in traces if isinstance(traces, list) else ():
                if not isinstance(trace, dict):
                    result.errors.append(f"GET {url}: a trace that is not an object")
                    continue
                trace_id = str(trace.get("traceID", ""))
                try:
                    spans = list(spans_from_jaeger(trace))  # validated: a bad trace adds no span
                except (JaegerFormatError, ValueError, TypeError, AttributeError) as exc:
                    result.errors.append(f"trace {trace_id}: {exc}")
                    continue
                oldest = min([oldest, *(s.start_time // 1000 for s in spans if s.start_time)])
                if trace_id in seen or len(seen) >= limit:
                    continue
                result.spans.extend(spans)
                seen.add(trace_id)
                result.trace_ids.append(trace_id)
                new += 1
            if progress:
                progress(len(seen), limit)
            if len(traces) < page or new == 0 or oldest >= end_us:
                break
            end_us = oldest - 1
    return result


def fetch_tempo(
    base_url: str,
    query: str,
    *,
    lookback_seconds: float = 3600,
    limit: int = 100,
    page_size: int = 20,
    timeout: float = 10.0,
    retries: int = 2,
    backoff: float = 0.2,
    progress: Progress | None = None,
    now: float | None = None,
    transport: httpx.BaseTransport | None = None,
) -> FetchResult:
    """TraceQL search over ``/api/search`` (paged backwards in time), then each trace from ``/api/v2/traces/<id>``."""
    result = FetchResult()
    end_s = int(now if now is not None else time.time())
    start_s = end_s - int(lookback_seconds)
    base = base_url.rstrip("/")
    ids: list[str] = []
    with httpx.Client(timeout=timeout, transport=transport) as client:
        while len(ids) < limit and end_s > start_s:
            params = {"q": query, "start": start_s, "end": end_s, "limit": page_size}
            try:
                document = _get_json(client, base + "/api/search", params, retries, backoff)
                found = document.get("traces") if isinstance(document, dict) else None
                if not isinstance(found, list):
                    raise FetchError(f"GET {base}/api/search: expected an object with 'traces'")
            except FetchError as exc:
                result.errors.append(str(exc))
                break
            oldest_ns = end_s * 1_000_000_000
            new = 0
            for item in found:
                if not isinstance(item, dict):
                    continue
                trace_id = str(item.get("traceID", ""))
                start = item.get("startTimeUnixNano", oldest_ns)
                if isinstance(start, (int, str)) and str(start).isdigit():
                    oldest_ns = min(oldest_ns, int(start))
                if trace_id and trace_id not in ids and len(ids) < limit:
                    ids.append(trace_id)
                    new += 1
            if len(found) < page_size:
                break
            # The search is in whole seconds: the next page ends at the oldest trace's second (inclusive, so
            # other traces of that second are not lost); a page of only repeats moves past that second.
            next_end = oldest_ns // 1_000_000_000
            end_s = next_end if new and next_end < end_s else end_s - 1
        for trace_id in ids:
            try:
                document = _fetch_tempo_trace(client, base, trace_id, retries, backoff)
                result.spans.extend(list(spans_from_request(request_from_json(document))))
                result.trace_ids.append(trace_id)
            except (FetchError, ValueError) as exc:
                result.errors.append(f"trace {trace_id}: {exc}")
            if progress:
                progress(len(result.trace_ids), len(ids))
    return result


def _fetch_tempo_trace(client: httpx.Client, base: str, trace_id: str, retries: int, backoff: float) -> Any:
    try:
        return _get_json(client, f"{base}/api/v2/traces/{trace_id}", {}, retries, backoff)
    except FetchError as exc:
        if "HTTP 404" not in str(exc):
            raise
    return _get_json(client, f"{base}/api/traces/{trace_id}", {}, retries, backoff)


def unique(spans: Iterable[ReadableSpan]) -> list[ReadableSpan]:
    seen: set[tuple[int, int]] = set()
    out = []
    for s in spans:
        key = (s.context.trace_id, s.context.span_id) if s.context is not None else (0, id(s))
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out
