"""A real MCP client calls through the guard's proxy (a subprocess, as a user runs it) to a real MCP server.

Over stdio both ways, and over streamable HTTP both ways: the forbidden call never reaches the server, the client
gets a proper MCP tool error (``isError``) with the guard's message, an allowed call goes through, and the proxy's
``apply_guardrail`` span reaches an OTLP receiver. In shadow mode the forbidden call runs and only the record says.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider

from tests.integration.otlp_receiver import HttpTraceReceiver, attributes
from tests.integration.redis_server import free_port

fastmcp = pytest.importorskip("fastmcp")
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport  # noqa: E402

pytestmark = pytest.mark.integration

UPSTREAM = str(Path(__file__).with_name("mcp_upstream.py"))
CONFIG = "policies:\n  must_not_call: [delete_all]\n"


@pytest.fixture
def receiver() -> Iterator[HttpTraceReceiver]:
    r = HttpTraceReceiver()
    yield r
    r.close()


def _env(tmp_path: Path, receiver: HttpTraceReceiver) -> dict[str, str]:
    return {
        **os.environ,
        "GUARD_TEST_LOG": str(tmp_path / "ran.log"),
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }


def _ran(tmp_path: Path) -> list[str]:
    log = tmp_path / "ran.log"
    return log.read_text().split() if log.exists() else []


def _config(tmp_path: Path, extra: str = "") -> str:
    path = tmp_path / "toolcall-eval.yaml"
    path.write_text(CONFIG + extra)
    return str(path)


async def _session(client: Any, tracer: Any = None) -> tuple[Any, Any, Any]:
    if tracer is not None:  # the agent's run: the MCP SDK propagates its context in each request's _meta
        with tracer.start_as_current_span("agent run"):
            return await _session(client)
    async with client:
        names = sorted(t.name for t in await client.list_tools())
        assert names == ["delete_all", "search"]
        allowed = await client.call_tool("search", {"q": "invoices"}, raise_on_error=False)
        forbidden = await client.call_tool("delete_all", {}, raise_on_error=False)
        failing = await client.call_tool("search", {"q": "fail"}, raise_on_error=False)
        again = await client.call_tool("search", {"q": "fail"}, raise_on_error=False)
        return allowed, forbidden, (failing, again)


def _guard_spans(receiver: HttpTraceReceiver, count: int) -> list[dict[str, Any]]:
    receiver.wait_for(
        lambda: sum(1 for s in receiver.spans() if s.span.name.startswith("apply_guardrail")) >= count,
        what=f"{count} apply_guardrail spans",
    )
    return [attributes(s.span.attributes) for s in receiver.spans() if s.span.name.startswith("apply_guardrail")]


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def test_stdio_proxy_blocks_the_forbidden_call_before_the_server_sees_it(tmp_path: Path, receiver: Any) -> None:
    proxy = StdioTransport(
        sys.executable,
        ["-m", "otel_toolcall_eval.guard.mcp", "--config", _config(tmp_path), "--", sys.executable, UPSTREAM],
        env=_env(tmp_path, receiver),
    )
    allowed, forbidden, (failing, again) = asyncio.run(_session(fastmcp.Client(proxy)))
    assert not allowed.is_error and _text(allowed) == "3 records match invoices"
    assert forbidden.is_error
    assert _text(forbidden) == (
        "The call of tool 'delete_all' was blocked by the tool-call guard: 'delete_all' must never be called"
    )
    assert failing.is_error and "index unavailable" in _text(failing)
    assert again.is_error and "the same call failed earlier" in _text(again)  # a repeated failure, stopped
    assert _ran(tmp_path) == ["search", "search"]  # delete_all and the repeat never reached the server
    spans = _guard_spans(receiver, 2)
    blocked = next(s for s in spans if s["gen_ai.tool.name"] == "delete_all")
    assert blocked["gen_ai.operation.name"] == "apply_guardrail"
    assert blocked["gen_ai.guardrail.result.value"] == "block" and blocked["toolcall_eval.guard.prevented"] is True
    assert blocked["gen_ai.guardrail.result.reason"] == "the tool is on policies.must_not_call"
    repeat = next(s for s in spans if s["gen_ai.tool.name"] == "search")
    assert list(repeat["toolcall_eval.guard.policies"]) == ["repeated_failure", "duplicate"]


def _serve(args: list[str], env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(proc.stderr.read().decode() if proc.stderr else "exited")
        try:
            httpx.get(f"http://127.0.0.1:{port}/mcp", timeout=0.5)
            return proc
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"nothing listens on {port}")


@pytest.mark.parametrize("mode", ["enforce", "shadow"])
def test_streamable_http_proxy_enforces_or_only_records(mode: str, tmp_path: Path, receiver: Any) -> None:
    env = _env(tmp_path, receiver)
    upstream_port, proxy_port = free_port(), free_port()
    upstream = _serve([sys.executable, UPSTREAM, "http", str(upstream_port)], env, upstream_port)
    proxy = None
    try:
        proxy = _serve(
            [sys.executable, "-m", "otel_toolcall_eval.guard.mcp", "--config", _config(tmp_path), "--mode", mode,
             "--transport", "http", "--port", str(proxy_port), "--", f"http://127.0.0.1:{upstream_port}/mcp"],
            env,
            proxy_port,
        )  # fmt: skip
        client = fastmcp.Client(StreamableHttpTransport(f"http://127.0.0.1:{proxy_port}/mcp"))
        allowed, forbidden, (failing, again) = asyncio.run(_session(client, TracerProvider().get_tracer("agent")))
        assert not allowed.is_error
        # stateless HTTP: the history is the agent's trace, propagated to the proxy
        assert failing.is_error and again.is_error
        assert ("the same call failed earlier" in _text(again)) is (mode == "enforce")
        if mode == "enforce":
            assert forbidden.is_error and "must never be called" in _text(forbidden)
            assert "delete_all" not in _ran(tmp_path)
        else:  # shadow: nothing changes but the record
            assert not forbidden.is_error and _text(forbidden) == "deleted"
            assert "delete_all" in _ran(tmp_path)
        spans = _guard_spans(receiver, 1)
        blocked = next(s for s in spans if s["gen_ai.tool.name"] == "delete_all")
        assert blocked["gen_ai.guardrail.result.value"] == "block"
        assert blocked["toolcall_eval.guard.mode"] == mode
        assert blocked["toolcall_eval.guard.prevented"] is (mode == "enforce")
    finally:
        for proc in (proxy, upstream):
            if proc is not None:
                proc.terminate()
                proc.wait(10)


def test_a_bad_config_exits_2_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("guard:\n  actions:\n    must_not_call: deny\n")
    result = subprocess.run(
        [sys.executable, "-m", "otel_toolcall_eval.guard.mcp", "--config", str(path), "--", "true"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "guard.actions.must_not_call" in result.stderr
