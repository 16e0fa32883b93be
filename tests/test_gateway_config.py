"""The Collector gateway tier (collector-config/gateway.yaml), validated statically.

The Collector binary cannot run here (no Docker engine, no release download), so ``otelcol-contrib validate``
is replaced by checks against the ``load_balancing`` exporter's documented configuration (its
``config.schema.yaml`` and README in opentelemetry-collector-contrib, v0.154, read for this test): the keys it
accepts, the routing keys it knows, one resolver, the OTLP protocol without an endpoint. The pipelines are
checked like the main collector config's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import check_pipelines

GATEWAY = Path(__file__).resolve().parents[1] / "collector-config" / "gateway.yaml"

# The exporter's documented keys (config.schema.yaml: protocol, resolver, routing_key, routing_attributes,
# sending_queue, plus the timeout and retry settings it embeds).
EXPORTER_KEYS = {
    "protocol",
    "resolver",
    "routing_key",
    "routing_attributes",
    "sending_queue",
    "timeout",
    "retry_on_failure",
}
ROUTING_KEYS = {"service", "traceID", "metric", "resource", "streamID", "attributes"}
TRACE_ROUTING_KEYS = {"service", "traceID", "attributes"}  # the ones documented for spans
RESOLVERS = {
    "static": {"hostnames"},
    "dns": {"hostname", "port", "interval", "timeout"},
    "k8s": {"service", "ports", "timeout", "return_hostnames"},
    "aws_cloud_map": {"namespace", "service_name", "port", "interval", "timeout", "health_status", "owner_account"},
}


@pytest.fixture(scope="module")
def gateway() -> dict[str, Any]:
    data = yaml.safe_load(GATEWAY.read_text())
    assert isinstance(data, dict)
    return data


def balancers(gateway: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in gateway["exporters"].items() if k.split("/")[0] == "load_balancing"}


def test_pipelines_reference_defined_components(gateway: dict[str, Any]) -> None:
    check_pipelines(gateway, "gateway")


def test_the_2026_type_name_and_only_documented_keys(gateway: dict[str, Any]) -> None:
    assert not any(k.split("/")[0] == "loadbalancing" for k in gateway["exporters"]), "loadbalancing is deprecated"
    found = balancers(gateway)
    assert found
    for name, config in found.items():
        assert set(config) <= EXPORTER_KEYS, f"{name}: unknown keys {sorted(set(config) - EXPORTER_KEYS)}"
        assert set(config["protocol"]) == {"otlp"}, f"{name}: only the otlp protocol exists"
        assert "endpoint" not in (config["protocol"]["otlp"] or {}), f"{name}: the resolver sets the endpoint"
        (resolver, settings), *others = config["resolver"].items()
        assert not others, f"{name}: one resolver"
        assert resolver in RESOLVERS and set(settings) <= RESOLVERS[resolver], f"{name}: resolver {resolver}"
        assert config.get("routing_key", "traceID") in ROUTING_KEYS


def test_traces_are_routed_by_trace_id_and_sessions_by_the_conversation_id(gateway: dict[str, Any]) -> None:
    pipelines = gateway["service"]["pipelines"]
    found = balancers(gateway)
    main = found[pipelines["traces"]["exporters"][0]]
    assert main.get("routing_key", "traceID") == "traceID" and "routing_attributes" not in main
    sessions = found[pipelines["traces/sessions"]["exporters"][0]]
    assert sessions["routing_key"] == "attributes" and sessions["routing_attributes"] == ["gen_ai.conversation.id"]
    for name, config in found.items():
        assert config.get("routing_key", "traceID") in TRACE_ROUTING_KEYS, name
        # routing_attributes means something only with routing_key: attributes
        assert ("routing_attributes" in config) == (config.get("routing_key") == "attributes"), name


def test_every_balancer_reaches_the_same_replicas_on_their_grpc_port(gateway: dict[str, Any]) -> None:
    """Both routes must see one replica set: a trace and its conversation are scored by the same fleet."""
    sets = {name: tuple(c["resolver"]["static"]["hostnames"]) for name, c in balancers(gateway).items()}
    assert len(set(sets.values())) == 1, sets
    hostnames = next(iter(sets.values()))
    assert len(hostnames) >= 2 and all(h.endswith(":4317") for h in hostnames)  # serve's default gRPC port


def test_retries_are_on_so_a_full_replica_delays_rather_than_drops(gateway: dict[str, Any]) -> None:
    for name, config in balancers(gateway).items():
        assert config["retry_on_failure"]["enabled"] is True, name
        assert config["protocol"]["otlp"]["tls"] == {"insecure": True}, (
            name
        )  # inside the deployment's network; see docs/serve.md
