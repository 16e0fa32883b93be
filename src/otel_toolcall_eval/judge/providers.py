"""The judge's model clients: OpenAI-compatible chat completions and Anthropic Messages, over httpx.

One ``send`` is one HTTP attempt; ``retrying`` retries 408/409/429/5xx, timeouts and connection errors with
full-jitter exponential backoff, honouring ``Retry-After`` / ``retry-after-ms`` (a wait longer than
``max_retry_wait_seconds`` gives up instead). Every failure becomes a ``JudgeCallError`` with a short ``kind``
(the verdict's ``error.type``) and whether the provider may have billed the attempt.

The judge's HTTP calls run with OpenTelemetry instrumentation suppressed, so an httpx instrumentation in the
application never records them as spans of the application's traces.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import os
import time
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_random_exponential

from otel_toolcall_eval import _json, _sdk
from otel_toolcall_eval.config import ConfigError
from otel_toolcall_eval.config.judge import JudgeConfig, QuestionConfig
from otel_toolcall_eval.judge.questions import Prompt, answer_schema

ANTHROPIC_VERSION = "2023-06-01"
VERDICT_TOOL = "record_verdict"
_RETRY_STATUS = frozenset({408, 409, 429})
DEFAULT_MAX_RESPONSE_BYTES = 1 << 20
_ERROR_BODY_BYTES = 4096  # of an error answer, only the start is quoted


class JudgeCallError(Exception):
    def __init__(
        self,
        kind: str,
        message: str,
        *,
        retryable: bool = False,
        retry_after: float | None = None,
        billed: bool = False,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.retryable = retryable
        self.retry_after = retry_after
        self.billed = billed


@dataclass(slots=True)
class Completion:
    text: str | None
    structured: dict[str, Any] | None
    input_tokens: int | None
    output_tokens: int | None
    model: str | None
    response_id: str | None


class ProviderAPI(Protocol):
    name: str

    def request(self, question: QuestionConfig, prompt: Prompt) -> tuple[str, dict[str, Any]]: ...

    def parse(self, payload: Any) -> Completion: ...


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class OpenAIChat:
    """``POST {base_url}/chat/completions``: OpenAI, vLLM, Ollama, LiteLLM, llama.cpp and other compatibles."""

    name = "openai"

    def __init__(self, config: JudgeConfig) -> None:
        self._config = config

    def request(self, question: QuestionConfig, prompt: Prompt) -> tuple[str, dict[str, Any]]:
        c = self._config
        body: dict[str, Any] = {
            "model": c.model,
            "messages": [{"role": "system", "content": prompt.system}, {"role": "user", "content": prompt.user}],
            c.token_limit_param: c.max_output_tokens,
        }
        if c.temperature is not None:
            body["temperature"] = c.temperature
        if c.json_mode:
            body["response_format"] = {"type": "json_object"}
        return "/chat/completions", body

    def parse(self, payload: Any) -> Completion:
        try:
            choice = payload["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise JudgeCallError("invalid_response", "no choices[0].message in the response", billed=True) from None
        usage = payload.get("usage") if isinstance(payload.get("usage"), dict) else {}
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):  # some compatibles return content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if content is None and isinstance(message, dict) and message.get("refusal"):
            raise JudgeCallError("refused", str(message["refusal"])[:200], billed=True)
        return Completion(
            text=content if isinstance(content, str) else None,
            structured=None,
            input_tokens=_int(usage.get("prompt_tokens")),
            output_tokens=_int(usage.get("completion_tokens")),
            model=payload.get("model") if isinstance(payload.get("model"), str) else None,
            response_id=payload.get("id") if isinstance(payload.get("id"), str) else None,
        )


class AnthropicMessages:
    """``POST {base_url}/v1/messages``, forcing one tool call whose input is the verdict (structured output)."""

    name = "anthropic"

    def __init__(self, config: JudgeConfig) -> None:
        self._config = config

    def request(self, question: QuestionConfig, prompt: Prompt) -> tuple[str, dict[str, Any]]:
        c = self._config
        body: dict[str, Any] = {
            "model": c.model,
            "max_tokens": c.max_output_tokens,
            "system": prompt.system,
            "messages": [{"role": "user", "content": prompt.user}],
            "tools": [
                {
                    "name": VERDICT_TOOL,
                    "description": "Record the verdict on the question.",
                    "input_schema": answer_schema(question),
                }
            ],
            "tool_choice": {"type": "tool", "name": VERDICT_TOOL},
        }
        if c.temperature is not None:
            body["temperature"] = min(c.temperature, 1.0)
        return "/v1/messages", body

    def parse(self, payload: Any) -> Completion:
        content = payload.get("content") if isinstance(payload, dict) else None
        if not isinstance(content, list):
            raise JudgeCallError("invalid_response", "no content list in the response", billed=True)
        usage = payload.get("usage") if isinstance(payload.get("usage"), dict) else {}
        structured: dict[str, Any] | None = None
        texts: list[str] = []
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use" and isinstance(block.get("input"), dict) and structured is None:
                structured = block["input"]
            elif block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
        input_tokens = _int(usage.get("input_tokens"))
        if input_tokens is not None:  # cache reads and writes are input too (priced here as plain input)
            input_tokens += sum(
                _int(usage.get(k)) or 0 for k in ("cache_creation_input_tokens", "cache_read_input_tokens")
            )
        return Completion(
            text="".join(texts) or None,
            structured=structured,
            input_tokens=input_tokens,
            output_tokens=_int(usage.get("output_tokens")),
            model=payload.get("model") if isinstance(payload.get("model"), str) else None,
            response_id=payload.get("id") if isinstance(payload.get("id"), str) else None,
        )


def make_api(config: JudgeConfig) -> ProviderAPI:
    return OpenAIChat(config) if config.provider == "openai" else AnthropicMessages(config)


def api_key(config: JudgeConfig) -> str | None:
    """The API key, from the environment only; a named variable that is unset is a configuration error."""
    if config.api_key_env is None:
        return None
    key = os.environ.get(config.api_key_env)
    if not key:
        raise ConfigError(f"judge.api_key_env: the environment variable {config.api_key_env} is not set")
    return key


def auth_headers(config: JudgeConfig, key: str | None) -> dict[str, str]:
    headers = dict(config.headers)
    if config.provider == "anthropic":
        headers["anthropic-version"] = ANTHROPIC_VERSION
        if key:
            headers["x-api-key"] = key
    elif key:
        headers["authorization"] = f"Bearer {key}"
    return headers


def new_client(
    config: JudgeConfig, key: str | None, transport: httpx.AsyncBaseTransport | None = None
) -> httpx.AsyncClient:
    timeout = config.request_timeout_seconds
    return httpx.AsyncClient(
        base_url=config.url,
        # uncompressed: the size cap counts decoded bytes, and a compressed answer could inflate far past it
        headers={"accept-encoding": "identity", **auth_headers(config, key)},
        timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
        limits=httpx.Limits(max_connections=config.concurrency, max_keepalive_connections=config.concurrency),
        transport=transport,
    )


def retry_after(headers: httpx.Headers, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        with contextlib.suppress(ValueError):
            return max(0.0, float(ms) / 1000)
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


async def send(
    client: httpx.AsyncClient,
    api: ProviderAPI,
    question: QuestionConfig,
    prompt: Prompt,
    *,
    max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    deadline: float | None = None,
) -> Completion:
    """One attempt. Raises ``JudgeCallError``; never anything else for network or protocol trouble.

    The answer is streamed and read up to ``max_bytes`` (a longer one is ``response_too_large``, unread), and
    the whole attempt (connect, send, wait, read) ends after ``deadline`` seconds: httpx's timeouts apply per
    read, so a server that drips a byte a second would otherwise hold an attempt open for as long as it drips.
    """
    path, body = api.request(question, prompt)
    try:
        with _sdk.uninstrumented():
            status, headers, payload = await asyncio.wait_for(_exchange(client, path, body, max_bytes), deadline)
    except (asyncio.TimeoutError, TimeoutError):
        raise JudgeCallError(
            "timeout", f"no complete answer within {deadline:g} s", retryable=True, billed=True
        ) from None
    except httpx.TimeoutException as exc:
        sent = not isinstance(exc, (httpx.ConnectTimeout, httpx.PoolTimeout))
        raise JudgeCallError("timeout", f"{type(exc).__name__}", retryable=True, billed=sent) from None
    except httpx.TransportError as exc:
        sent = not isinstance(exc, httpx.ConnectError)
        raise JudgeCallError("connection_error", f"{type(exc).__name__}: {exc}", retryable=True, billed=sent) from None
    text = payload[:200].decode("utf-8", "replace")
    if status != 200:
        retryable = status in _RETRY_STATUS or status >= 500
        raise JudgeCallError(
            f"http_{status}",
            f"HTTP {status}: {text}",
            retryable=retryable,
            retry_after=retry_after(headers) if retryable else None,
        )
    try:
        data = _json.loads(payload)
    except (_json.JSONDecodeError, RecursionError):
        raise JudgeCallError("invalid_response", f"not JSON: {text!r}", billed=True) from None
    if not isinstance(data, dict):
        raise JudgeCallError("invalid_response", "the response is not a JSON object", billed=True)
    return api.parse(data)


async def _exchange(
    client: httpx.AsyncClient, path: str, body: dict[str, Any], max_bytes: int
) -> tuple[int, httpx.Headers, bytes]:
    """POST and read the answer, at most ``max_bytes`` of it (an error answer: at most ``_ERROR_BODY_BYTES``)."""
    async with client.stream("POST", path, json=body) as response:
        status = response.status_code
        limit = max_bytes if status == 200 else _ERROR_BODY_BYTES
        declared = response.headers.get("content-length", "")
        if status == 200 and declared.isdigit() and int(declared) > limit:
            raise _too_large(f"the answer declares {int(declared)} bytes")
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > limit:
                if status != 200:  # an error's body is only quoted: its start is enough
                    chunks.append(chunk[: limit - size + len(chunk)])
                    break
                raise _too_large(f"the answer exceeds {limit} bytes")
            chunks.append(chunk)
        return status, response.headers, b"".join(chunks)


def _too_large(message: str) -> JudgeCallError:
    # The model generated it, so it may have been billed; not retried (the same question would answer the same).
    return JudgeCallError("response_too_large", message, billed=True)


def retrying(config: JudgeConfig) -> AsyncRetrying:
    """The retry policy of one judge call."""
    backoff = wait_random_exponential(multiplier=config.retry_backoff_seconds, max=config.max_retry_wait_seconds)

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, JudgeCallError) and exc.retry_after is not None:
            return exc.retry_after
        return float(backoff(state))

    def should_retry(exc: BaseException) -> bool:
        if not isinstance(exc, JudgeCallError) or not exc.retryable:
            return False
        return exc.retry_after is None or exc.retry_after <= config.max_retry_wait_seconds

    return AsyncRetrying(
        stop=stop_after_attempt(config.max_retries + 1),
        wait=wait,
        retry=retry_if_exception(should_retry),
        reraise=True,
    )
