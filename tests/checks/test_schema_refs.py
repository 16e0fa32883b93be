"""Schemas from trace data and datasets never reach outside their own document (issue 15, item 1).

A ``$ref`` (or a relative ``$ref`` under an ``$id``, or an unknown ``$schema``) to a URL or a file is refused:
no request reaches the server, no byte of the file reaches a report, and the call gets no schema verdict, as
for any other broken schema. References inside the document (``#/$defs/...``, anchors) still work.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from otel_toolcall_eval.checks.schema import ValidatorCache, validate_arguments
from otel_toolcall_eval.cli import main
from otel_toolcall_eval.config import ConfigError, EvalConfig
from otel_toolcall_eval.dataset import template_cases, write_cases
from otel_toolcall_eval.records import ToolDefinition
from tests.helpers import assert_replay_matches, chat_span, make_pipeline, scores, tool_span

SECRET = "s3cr3t-from-the-schema-server-or-file"


@dataclass
class SchemaServer:
    """A server on 127.0.0.1 that answers every GET with a schema quoting ``SECRET``, and records the paths."""

    base: str
    hits: list[str] = field(default_factory=list)


@pytest.fixture
def server() -> Iterator[SchemaServer]:
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            body = json.dumps({"type": "string", "enum": [SECRET]}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/schema+json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield SchemaServer(f"http://127.0.0.1:{httpd.server_port}", hits)
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def secret_file(tmp_path: Path) -> str:
    path = tmp_path / "local-schema.json"
    path.write_text(json.dumps({"type": "string", "enum": [SECRET]}))
    return path.as_uri()


def _external(server: SchemaServer, secret_file: str) -> dict[str, dict[str, Any]]:
    """Every way a schema can point outside itself."""
    return {
        "http_ref": {"type": "object", "properties": {"city": {"$ref": f"{server.base}/city.json"}}},
        "file_ref": {"type": "object", "properties": {"city": {"$ref": secret_file}}},
        "id_relative_ref": {
            "$id": f"{server.base}/root.json",
            "type": "object",
            "properties": {"city": {"$ref": "city.json"}},
        },
        "unknown_metaschema": {"$schema": f"{server.base}/meta.json", "type": "object"},
    }


def test_the_validator_cache_refuses_external_references(server: SchemaServer, secret_file: str) -> None:
    cache = ValidatorCache()
    for name, schema in _external(server, secret_file).items():
        definition = ToolDefinition("get_weather", schema)
        assert validate_arguments({"city": "Paris"}, definition, cache) is None, name
    assert server.hits == []


def test_local_references_still_resolve() -> None:
    cache = ValidatorCache()
    schemas = [
        {"$defs": {"c": {"type": "integer"}}, "properties": {"city": {"$ref": "#/$defs/c"}}},
        {
            "$id": "https://tools.example/weather.json",  # an $id never makes a local reference external
            "$defs": {"c": {"$anchor": "City", "type": "integer"}},
            "properties": {"city": {"$ref": "#City"}},
        },
        {
            "$schema": "http://json-schema.org/draft-07/schema#",  # a known draft: built in, not fetched
            "definitions": {"c": {"type": "integer"}},
            "properties": {"city": {"$ref": "#/definitions/c"}},
        },
    ]
    for schema in schemas:
        definition = ToolDefinition("get_weather", schema)
        ok = validate_arguments({"city": 3}, definition, cache)
        bad = validate_arguments({"city": "Paris"}, definition, cache)
        assert ok is not None and ok.valid, schema
        assert bad is not None and not bad.valid and "integer" in bad.errors[0], schema


def test_span_end_never_fetches_a_reference_from_trace_definitions(server: SchemaServer, secret_file: str) -> None:
    """``gen_ai.tool.definitions`` on the chat span and OpenInference ``tool.parameters`` on the tool span."""
    p = make_pipeline()
    for schema in _external(server, secret_file).values():
        tool = {"type": "function", "name": "get_weather", "description": "Weather", "parameters": schema}
        with p.tracer.start_as_current_span("agent run"):
            chat_span(p.tracer, [tool])
            tool_span(p.tracer, "get_weather", {"city": "Paris"})
        with (
            p.tracer.start_as_current_span("agent run"),
            p.tracer.start_as_current_span(
                "lookup",
                attributes={
                    "openinference.span.kind": "TOOL",
                    "tool.name": "get_weather",
                    "input.value": json.dumps({"city": "Paris"}),
                    "tool.parameters": json.dumps(schema),
                },
            ),
        ):
            pass
    tool_spans = [s for s in p.spans() if scores(s).get("convention") in ("genai", "openinference")]
    assert len(tool_spans) == 8
    for span in tool_spans:
        got = scores(span)
        assert "schema_valid" not in got and "schema_errors" not in got, got
        assert got["parse_ok"] is True and "eval_error" not in got
    assert SECRET not in repr([dict(s.attributes or {}) for s in p.spans()])
    assert_replay_matches(p.spans(), p.spans())  # replay walks the same path
    assert server.hits == []


def test_offline_eval_never_fetches_a_reference_from_available_tools(
    tmp_path: Path, server: SchemaServer, secret_file: str, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = {
        "type": "object",
        "properties": {"order_id": {"$ref": f"{server.base}/order.json"}, "note": {"$ref": secret_file}},
    }
    tool = {"type": "function", "function": {"name": "get_order", "description": "Look up", "parameters": schema}}
    cases = [
        c.model_copy(update={"available_tools": [tool, *c.available_tools[1:]]}) if c.id == "order-status" else c
        for c in template_cases()
    ]
    dataset, run, js = tmp_path / "d.jsonl", tmp_path / "run.jsonl", tmp_path / "r.json"
    write_cases(dataset, cases)
    call = {"name": "get_order", "arguments": {"order_id": "12345", "include_history": False, "note": "x"}}
    run.write_text(json.dumps({"id": "order-status", "tool_calls": [call]}) + "\n")
    main(["eval", "--dataset", str(dataset), "--runs", str(run), "--json", str(js)])
    out = capsys.readouterr()
    assert server.hits == []
    assert SECRET not in out.out + out.err + js.read_text()


def test_config_schemas_with_external_references_are_config_errors(server: SchemaServer, tmp_path: Path) -> None:
    """The config is trusted, but a reference it makes would be fetched on the hot path: refused at load."""
    path = tmp_path / "c.yaml"
    for text, where in (
        (
            f"tools:\n  - name: get_weather\n    parameters: {{$ref: '{server.base}/w.json'}}\n",
            "tools.0.parameters",
        ),
        (
            f"policies:\n  argument_rules:\n    - {{tool: rm, schema: {{$ref: '{server.base}/r.json'}}}}\n",
            "policies.argument_rules.0.schema",
        ),
    ):
        path.write_text(text)
        with pytest.raises(ConfigError) as err:
            EvalConfig.load(path)
        assert where in str(err.value) and "external reference" in str(err.value)
    assert server.hits == []
