"""The deployment files agree with each other and with the code.

No Docker engine runs here, so the compose stack is validated statically: every file is parsed, every
reference between files is resolved (pipelines to components, ports to listeners, mounts to files,
data-source UIDs, dashboard and alert queries to the metric names the processor really emits), and every
image is pinned. The Prometheus rules are checked and unit-tested with the real ``promtool``.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import promql_parser as pq
import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from otel_toolcall_eval import __version__
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.cli import build_parser, main
from otel_toolcall_eval.guard.record import GUARD_METRICS
from otel_toolcall_eval.judge.emit import JUDGE_METRICS
from otel_toolcall_eval.online.metrics import METRICS
from tests.helpers import check_pipelines

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
COLLECTOR_FILE = ROOT / "collector-config" / "config.yaml"
DEPLOY = ROOT / "deploy"
JAEGER_FILE = DEPLOY / "jaeger" / "config.yaml"
TEMPO_FILE = DEPLOY / "tempo" / "tempo.yaml"
PROMETHEUS_FILE = DEPLOY / "prometheus" / "prometheus.yml"
RULES_FILE = DEPLOY / "prometheus" / "rules" / "toolcall-eval.rules.yml"
RULE_TESTS = sorted((DEPLOY / "prometheus" / "tests").glob("*.yml"))
GRAFANA = DEPLOY / "grafana"
DASHBOARD_FILE = GRAFANA / "dashboards" / "toolcall-eval.json"
# What the Collector (span_metrics connector) and Tempo add: a dashboard of its own, so the one above needs only the
# processor's metrics (tests/integration/test_dashboard_e2e.py: every panel of it shows data from the demo alone).
TRACES_DASHBOARD_FILE = GRAFANA / "dashboards" / "toolcall-eval-traces.json"
DATASOURCES_FILE = GRAFANA / "provisioning" / "datasources" / "datasources.yaml"
DASHBOARD_PROVIDER_FILE = GRAFANA / "provisioning" / "dashboards" / "toolcall-eval.yaml"
GRAFANA_ALERTS_FILE = GRAFANA / "provisioning" / "alerting" / "toolcall-eval.yaml"
DOCKERFILE = ROOT / "Dockerfile"
SCORER_FILE = DEPLOY / "scorer" / "toolcall-eval.yaml"
REPLICA_FILE = DEPLOY / "scorer" / "replica.yaml"
GATEWAY_FILE = ROOT / "collector-config" / "gateway.yaml"
DEPLOYMENT_DOC = ROOT / "docs" / "deployment.md"

# The LLM judge's metrics (judge/emit.py), by Prometheus name, with their labels.
JUDGE_METRIC_LABELS = {
    doc.prometheus: {label.replace(".", "_") for label in re.findall(r"`([\w.]+)`", doc.labels.split("(")[0])}
    for doc in JUDGE_METRICS
}
# Labels Prometheus adds to every scraped series (target labels, OTel scope labels).
TARGET_LABELS = {"job", "instance", "otel_scope_name", "otel_scope_version", "otel_scope_schema_url"}
# Component types renamed in 2026 (the old names are deprecated aliases) or unmaintained, per kind.
DEPRECATED_COMPONENTS = {
    "exporters": {"otlp": "otlp_grpc", "otlphttp": "otlp_http", "prometheusremotewrite": "prometheus_remote_write"},
    "connectors": {"spanmetrics": "span_metrics", "count": "(unmaintained: count with the processor's metrics)"},
}
GRAFANA_MACROS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}


# --- loading ---------------------------------------------------------------------------------------


def load_yaml(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict), f"{path.relative_to(ROOT)}: top level is not a mapping"
    return data


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load_yaml(COMPOSE_FILE)


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    services = compose["services"]
    assert isinstance(services, dict)
    return services


@pytest.fixture(scope="module")
def collector() -> dict[str, Any]:
    return load_yaml(COLLECTOR_FILE)


def load_dashboard(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return load_dashboard(DASHBOARD_FILE)


@pytest.fixture(scope="module")
def traces_dashboard() -> dict[str, Any]:
    return load_dashboard(TRACES_DASHBOARD_FILE)


@pytest.fixture(scope="module")
def rules() -> list[dict[str, Any]]:
    return [rule for group in load_yaml(RULES_FILE)["groups"] for rule in group["rules"]]


class _Sized:
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n


@pytest.fixture(scope="module")
def emitted() -> dict[str, set[str]]:
    """Prometheus sample names the processor really emits, with their labels.

    Every metric of ``EvalMetrics`` is recorded once through the SDK's real Prometheus exporter, into a
    private registry, and the exposition text is parsed back: the names are not derived by hand.
    """
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.sdk.metrics import MeterProvider

    from otel_toolcall_eval.online.metrics import MAX_SOURCE_LABELS, EvalMetrics, SessionMetrics, TraceCounts
    from otel_toolcall_eval.records import CallScore, Outcome, TraceVerdict

    registry = CollectorRegistry()
    reader = PrometheusMetricReader(registry=registry)
    provider = MeterProvider(metric_readers=[reader])
    try:
        metrics = EvalMetrics(provider)
        trace = TraceCounts("travel", "1.4.0")
        trace.note_agent({A.GEN_AI_AGENT_NAME: "planner"})
        metrics.record_call(
            CallScore(name="send_email", step=1, outcome=Outcome.MALFORMED_CALL, schema_valid=False),
            trace=trace,
            seconds=0.2,  # toolcall_eval.tool.latency
        )
        source = metrics.record_trace(TraceVerdict(1, 1, False, 1, 1, False), "root", trace)
        for n in range(MAX_SOURCE_LABELS):  # one source too many: the overflow is used and counted
            metrics.record_trace(TraceVerdict(1, 1, True, 0, 0, True), "root", TraceCounts(f"svc-{n}", ""))
        metrics.record_error("score")
        metrics.record_dropped("evicted")
        metrics.record_queue_wait()
        metrics.record_late()
        metrics.record_scope(CallScore(name="", step=1, outcome=Outcome.SUCCESS), "genai", "acme.instrumentation")
        queue = _Sized(3)  # anything with a length: what a background queue reports
        metrics.watch_queue(queue)
        stats = {
            A.TRACE_MODEL_CALLS: 2,
            A.TRACE_INPUT_TOKENS: 100,
            A.TRACE_OUTPUT_TOKENS: 20,
            A.TRACE_COST: 0.001,
            A.TRACE_TOOL_LATENCY_TOTAL: 0.2,
            A.TRACE_TOOL_ERROR_RATE: 0.5,
        }
        metrics.record_trace_stats(stats, [("send_email", "corrected_retry")], "USD", source=source)
        metrics.record_tool_list_change(source)
        metrics.record_unclassified("max_hold_seconds")
        metrics.record_unread("max_hold_seconds")
        sessions = SessionMetrics(provider)
        sessions.record_session("fail", 3, "idle")
        sessions.record_dropped("evicted")
        text = generate_latest(registry).decode()
    finally:
        provider.shutdown()
    names: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("toolcall_eval_"):
                names.setdefault(sample.name, set()).update(sample.labels)
    return names


def span_metric_names(collector: Mapping[str, Any]) -> dict[str, set[str]]:
    """What Prometheus sees from the collector's span_metrics connector, derived from its config."""
    connector = collector["connectors"]["span_metrics"]
    prefix = connector["namespace"].replace(".", "_")
    unit = {"s": "seconds", "ms": "milliseconds"}[connector["histogram"]["unit"]]
    labels = {"service_name", "span_name", "span_kind", "status_code"}
    labels |= {d["name"].replace(".", "_") for d in connector["dimensions"]}
    duration = f"{prefix}_duration_{unit}"
    return {
        f"{prefix}_calls_total": labels,
        f"{duration}_bucket": labels | {"le"},
        f"{duration}_sum": labels,
        f"{duration}_count": labels,
    }


@pytest.fixture(scope="module")
def known_metrics(emitted: dict[str, set[str]], collector: dict[str, Any]) -> dict[str, set[str]]:
    known = dict(JUDGE_METRIC_LABELS)
    known.update(span_metric_names(collector))
    for doc in METRICS:  # documented metrics that EvalMetrics does not record (e.g. the judge's)
        labels = {label.replace(".", "_") for label in re.findall(r"`([\w.]+)`", doc.labels)}
        known[doc.prometheus] = labels | ({"le"} if doc.prometheus.endswith("_bucket") else set())
    for _, _, labels, prometheus, _ in GUARD_METRICS:  # the guard's (tests/guard/test_record.py: as emitted)
        known[prometheus] = {label.replace(".", "_") for label in re.findall(r"`([\w.]+)`", labels)}
    known.update(emitted)
    return known


# --- small parsers ---------------------------------------------------------------------------------


def port_of(endpoint: str) -> int:
    """The port of ``0.0.0.0:4317``, ``jaeger:4317`` or ``http://jaeger:16686``."""
    parsed = urlparse(endpoint if "//" in endpoint else f"//{endpoint}")
    assert parsed.port is not None, f"no port in endpoint {endpoint!r}"
    return parsed.port


def host_of(endpoint: str) -> str:
    parsed = urlparse(endpoint if "//" in endpoint else f"//{endpoint}")
    assert parsed.hostname, f"no host in endpoint {endpoint!r}"
    return parsed.hostname


def command_of(service: Mapping[str, Any]) -> list[str]:
    command = service.get("command", [])
    return command.split() if isinstance(command, str) else [str(c) for c in command]


def flag_value(command: list[str], flag: str) -> str | None:
    for i, arg in enumerate(command):
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
        if arg == flag and i + 1 < len(command):
            return command[i + 1]
    return None


def published_ports(service: Mapping[str, Any]) -> list[tuple[int, int]]:
    """(host port, container port) of each published port, short or long syntax."""
    out = []
    for entry in service.get("ports", []):
        if isinstance(entry, dict):
            out.append((int(entry["published"]), int(entry["target"])))
            continue
        parts = str(entry).split("/")[0].split(":")
        host, container = (parts[-1], parts[-1]) if len(parts) == 1 else (parts[-2], parts[-1])
        out.append((int(host), int(container)))
    return out


def mounts(service: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(source, container target) of each volume: a ``./path`` bind mount or a named volume."""
    out = []
    for entry in service.get("volumes", []):
        if isinstance(entry, dict):
            out.append((str(entry["source"]), str(entry["target"])))
        else:
            source, target = str(entry).split(":")[:2]
            out.append((source, target))
    return out


def host_path(service: Mapping[str, Any], container_path: str) -> Path | None:
    """The repository path a container path is bind-mounted from (longest mount prefix wins)."""
    best: tuple[str, str] | None = None
    for source, target in mounts(service):
        inside = container_path == target or container_path.startswith(target.rstrip("/") + "/")
        if source.startswith(".") and inside and (best is None or len(target) > len(best[1])):
            best = (source, target)
    if best is None:
        return None
    return (ROOT / best[0]).resolve() / container_path[len(best[1]) :].lstrip("/")


def grafana_expr(expr: str) -> str:
    """A dashboard query made parseable: Grafana macros and variables become concrete values."""
    for macro, value in GRAFANA_MACROS.items():
        expr = expr.replace(macro, value)
    return re.sub(r"\$\{?\w+(?::\w+)?\}?", ".+", expr)


def parse_promql(expr: str, where: str) -> pq.Expr:
    try:
        return pq.parse(expr)
    except ValueError as exc:
        pytest.fail(f"{where}: PromQL does not parse: {exc}\n{expr}")


def walk(expr: pq.Expr, visit: Callable[[Any], None]) -> None:
    pq.walk(expr, visit)


def selectors(expr: pq.Expr) -> list[tuple[str, set[str]]]:
    """(metric name, label names matched) of every vector selector."""
    found: list[tuple[str, set[str]]] = []

    def visit(node: Any) -> None:
        if isinstance(node, pq.VectorSelector) and node.name:
            found.append((node.name, {m.name for m in node.matchers.matchers}))

    walk(expr, visit)
    return found


def ranges(expr: pq.Expr, recorded: Mapping[str, pq.Expr] | None = None) -> set[timedelta]:
    """Range windows used, also through the recording rules the expression reads."""
    found: set[timedelta] = set()

    def visit(node: Any) -> None:
        if isinstance(node, pq.MatrixSelector):
            found.add(node.range)
        elif isinstance(node, pq.VectorSelector) and recorded and node.name in recorded:
            found.update(ranges(recorded[node.name], recorded))

    walk(expr, visit)
    return found


def constant(node: Any) -> float | None:
    if isinstance(node, pq.NumberLiteral):
        return float(node.val)
    if isinstance(node, pq.ParenExpr):
        return constant(node.expr)
    if isinstance(node, pq.BinaryExpr) and str(node.op) in {"*", "/", "+", "-"}:
        lhs, rhs = constant(node.lhs), constant(node.rhs)
        if lhs is None or rhs is None:
            return None
        return {"*": lhs * rhs, "/": lhs / rhs, "+": lhs + rhs, "-": lhs - rhs}[str(node.op)]
    return None


def thresholds(expr: pq.Expr) -> set[tuple[str, float]]:
    """Every comparison against a constant, e.g. ``{(">", 0.1), (">=", 20.0)}``."""
    found: set[tuple[str, float]] = set()

    def visit(node: Any) -> None:
        if isinstance(node, pq.BinaryExpr) and str(node.op) in {">", "<", ">=", "<="}:
            value = constant(node.rhs)
            if value is not None:
                found.add((str(node.op), round(value, 9)))

    walk(expr, visit)
    return found


def check_metric_names(expr: pq.Expr, known: Mapping[str, set[str]], allowed: set[str], where: str) -> None:
    for name, labels in selectors(expr):
        if name in allowed:
            continue
        assert name in known, f"{where}: metric {name} is not emitted by the processor or the collector"
        unknown = labels - known[name] - TARGET_LABELS - {"__name__"}
        assert not unknown, f"{where}: {name} has no label(s) {sorted(unknown)}"


TRACEQL_ATTRIBUTE = re.compile(r"\b(span|resource)\.([A-Za-z_][\w.]*)")
KNOWN_ATTRIBUTES = {v for k, v in vars(A).items() if k.isupper() and isinstance(v, str)}


def check_traceql(query: str, where: str) -> None:
    """Every span attribute a TraceQL query names is one the processor or the conventions define."""
    names = [name for scope, name in TRACEQL_ATTRIBUTE.findall(query) if scope == "span"]
    assert names, f"{where}: no span attribute in TraceQL {query!r}"
    for name in names:
        assert name in KNOWN_ATTRIBUTES, f"{where}: TraceQL names {name}, not an attribute in attributes.py"


def listen_ports(services: Mapping[str, Any], collector: Mapping[str, Any]) -> dict[str, set[int]]:
    """The ports each service listens on, read from that service's own configuration."""
    jaeger, tempo = load_yaml(JAEGER_FILE), load_yaml(TEMPO_FILE)

    def otel_ports(config: Mapping[str, Any]) -> set[int]:
        ports = {
            port_of(p["endpoint"])
            for receiver_id, receiver in config["receivers"].items()
            if receiver_id.split("/")[0] == "otlp"
            for p in receiver["protocols"].values()
        }
        for reader in config["service"].get("telemetry", {}).get("metrics", {}).get("readers", []):
            ports.add(int(reader["pull"]["exporter"]["prometheus"]["port"]))
        return ports

    collector_ports = otel_ports(collector) | {port_of(collector["exporters"]["prometheus"]["endpoint"])}
    collector_ports.add(port_of(collector["extensions"]["health_check"]["endpoint"]))
    jaeger_query = jaeger["extensions"]["jaeger_query"]
    jaeger_ports = otel_ports(jaeger) | {
        port_of(jaeger_query["http"]["endpoint"]),
        port_of(jaeger_query["grpc"]["endpoint"]),
    }
    tempo_ports = {int(tempo["server"]["http_listen_port"])}
    tempo_ports |= {port_of(p["endpoint"]) for p in tempo["distributor"]["receivers"]["otlp"]["protocols"].values()}
    prometheus_listen = flag_value(command_of(services["prometheus"]), "--web.listen-address") or "0.0.0.0:9090"
    grafana_port = int(services["grafana"].get("environment", {}).get("GF_SERVER_HTTP_PORT", 3000))
    serve = scorer_settings(services["scorer"]).serve
    scorer_ports = {p for p in (serve.grpc_port, serve.http_port, serve.prometheus_port) if p is not None}
    replica = scorer_settings(services["toolcall-eval-1"], REPLICA_FILE).serve
    replica_ports = {p for p in (replica.grpc_port, replica.http_port, replica.prometheus_port) if p is not None}
    return {
        "scorer": scorer_ports,
        "toolcall-eval-1": replica_ports,
        "toolcall-eval-2": replica_ports,
        "gateway": otel_ports(load_yaml(GATEWAY_FILE))
        | {port_of(load_yaml(GATEWAY_FILE)["extensions"]["health_check"]["endpoint"])},
        "redis": {6379},
        "collector": collector_ports,
        "jaeger": jaeger_ports,
        "tempo": tempo_ports,
        "prometheus": {port_of(prometheus_listen)},
        "grafana": {grafana_port},
    }


def scorer_settings(scorer: Mapping[str, Any], config_file: Path | None = None) -> Any:
    """The scorer's ``EvalConfig`` as ``serve`` builds it: its command parsed by the real CLI parser, the config
    file it names read from the repository path mounted there."""
    from otel_toolcall_eval.commands.serve import settings

    args = build_parser().parse_args(command_of(scorer))
    assert args.command == "serve", "the scorer runs otel-toolcall-eval serve"
    mounted = host_path(scorer, str(args.config))
    expected = config_file or SCORER_FILE
    assert mounted == expected.resolve(), f"scorer: --config {args.config} is not {expected.relative_to(ROOT)}"
    args.config = mounted
    return settings(args)


def iter_dashboard_targets(dashboard: Mapping[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            yield panel, target


def explore_panes(url: str) -> dict[str, Any]:
    """The Explore state a data link opens, with Grafana's ``${...}`` variables filled in."""
    parsed = urlparse(url)
    assert parsed.path == "/explore", f"data link {url!r} does not open Explore"
    panes = parse_qs(parsed.query)["panes"][0]
    panes = re.sub(r"\$\{__(from|to)\}", "1700000000000", panes)
    panes = re.sub(r"\$\{__field\.labels\.\w+\}", "send_email", panes)
    data = json.loads(panes)
    assert isinstance(data, dict)
    return data


# --- the collector -----------------------------------------------------------------------------------


def test_collector_pipelines_reference_defined_components(collector: dict[str, Any]) -> None:
    check_pipelines(collector, "collector-config")


def test_jaeger_pipelines_reference_defined_components() -> None:
    check_pipelines(load_yaml(JAEGER_FILE), "jaeger")


def test_collector_uses_the_2026_component_names(collector: dict[str, Any]) -> None:
    for kind, deprecated in DEPRECATED_COMPONENTS.items():
        for component in collector.get(kind) or {}:
            component_type = component.split("/")[0]
            assert component_type not in deprecated, (
                f"collector-config: {kind[:-1]} {component} is deprecated; use {deprecated[component_type]}"
            )
    assert {c.split("/")[0] for c in collector["exporters"]} >= {"otlp_grpc"}
    assert "span_metrics" in collector["connectors"]


def test_collector_pipelines_limit_memory_first_and_batch_last(collector: dict[str, Any]) -> None:
    for pipeline_id, pipeline in collector["service"]["pipelines"].items():
        processors = pipeline["processors"]
        assert processors[0] == "memory_limiter", f"pipeline {pipeline_id}: memory_limiter must come first"
        assert processors[-1] == "batch", f"pipeline {pipeline_id}: batch must come last"
    limiter = collector["processors"]["memory_limiter"]
    assert limiter["check_interval"] and (limiter.get("limit_mib") or limiter.get("limit_percentage"))


def test_collector_fans_traces_out_to_jaeger_and_tempo_and_metrics_to_prometheus(
    collector: dict[str, Any], services: dict[str, Any]
) -> None:
    listening = listen_ports(services, collector)
    pipelines = collector["service"]["pipelines"]
    targets = set()
    for exporter in pipelines["traces"]["exporters"]:
        if exporter.startswith("otlp_grpc/"):
            endpoint = collector["exporters"][exporter]["endpoint"]
            host = host_of(endpoint)
            assert host in services, f"exporter {exporter}: no compose service {host}"
            assert port_of(endpoint) in listening[host], f"exporter {exporter}: {host} does not listen on {endpoint}"
            targets.add(host)
    assert targets == {"jaeger", "tempo"}
    assert "span_metrics" in pipelines["traces"]["exporters"]
    assert "span_metrics" in pipelines["metrics"]["receivers"] and "otlp" in pipelines["metrics"]["receivers"]
    assert pipelines["metrics"]["exporters"] == ["prometheus"]


def test_span_metrics_set_their_unit_and_use_known_attributes(collector: dict[str, Any]) -> None:
    connector = collector["connectors"]["span_metrics"]
    assert connector["histogram"]["unit"] in {"s", "ms"}, "set the span-metrics histogram unit explicitly"
    for dimension in connector["dimensions"]:
        assert dimension["name"] in KNOWN_ATTRIBUTES, f"span_metrics dimension {dimension['name']} is not an attribute"
    assert A.OUTCOME in {d["name"] for d in connector["dimensions"]}


def test_prometheus_exporter_keeps_the_names_the_rules_use(collector: dict[str, Any]) -> None:
    exporter = collector["exporters"]["prometheus"]
    assert exporter["translation_strategy"] == "UnderscoreEscapingWithSuffixes"


# --- compose: services, images, ports, mounts -------------------------------------------------------


def image_tag(image: str) -> str:
    name = image.split("@")[0]
    last = name.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else ""


def check_pinned(image: str, where: str) -> None:
    tag = image_tag(image)
    assert tag, f"{where}: image {image} has no tag"
    assert tag != "latest" and "latest" not in tag, f"{where}: image {image} is not pinned"
    assert re.fullmatch(r"v?\d+\.\d+(\.\d+)?([.-][\w.-]+)?", tag), f"{where}: {image}: tag is not a version"


def test_every_image_is_pinned(services: dict[str, Any]) -> None:
    expected = {"collector", "jaeger", "tempo-init", "tempo", "prometheus", "grafana", "demo", "scorer"}
    expected |= {"gateway", "toolcall-eval-1", "toolcall-eval-2", "redis"}  # profile gateway
    assert set(services) == expected
    for name, service in services.items():
        assert "image" in service, f"service {name} has no image"
        check_pinned(service["image"], f"service {name}")
    from_lines = re.findall(r"^FROM\s+(\S+)", DOCKERFILE.read_text(), re.M)
    assert from_lines, "Dockerfile has no FROM"
    for image in from_lines:
        check_pinned(image, "Dockerfile")


def test_images_are_the_components_asked_for(services: dict[str, Any]) -> None:
    assert services["collector"]["image"].split(":")[0] == "otel/opentelemetry-collector-contrib"
    assert services["jaeger"]["image"].split(":")[0] == "jaegertracing/jaeger"
    assert image_tag(services["jaeger"]["image"]).startswith("2."), "Jaeger v2"
    assert services["tempo"]["image"] == services["tempo-init"]["image"]
    assert image_tag(services["demo"]["image"]) == __version__, "the demo image is tagged with the package version"


def test_only_the_collector_owns_the_otlp_host_ports(services: dict[str, Any], collector: dict[str, Any]) -> None:
    listening = listen_ports(services, collector)
    seen: dict[int, str] = {}
    for name, service in services.items():
        for host_port, container_port in published_ports(service):
            assert host_port not in seen, f"host port {host_port} published by {seen[host_port]} and {name}"
            seen[host_port] = name
            assert container_port in listening.get(name, set()), (
                f"{name} publishes {container_port}, not a port it listens on"
            )
    assert seen[4317] == seen[4318] == "collector"
    grpc = collector["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"]
    http = collector["receivers"]["otlp"]["protocols"]["http"]["endpoint"]
    assert (4317, port_of(grpc)) in published_ports(services["collector"])
    assert (4318, port_of(http)) in published_ports(services["collector"])
    for entry in (p for s in services.values() for p in s.get("ports", [])):
        assert str(entry).startswith("127.0.0.1:"), f"port {entry} is published on every interface"


def test_bind_mounts_exist_and_named_volumes_are_declared(compose: dict[str, Any], services: dict[str, Any]) -> None:
    declared = set(compose.get("volumes") or {})
    used = set()
    for name, service in services.items():
        for source, target in mounts(service):
            assert target.startswith("/"), f"{name}: mount target {target} is not absolute"
            if source.startswith("."):
                assert (ROOT / source).exists(), f"{name}: mounted {source} does not exist"
            else:
                assert source in declared, f"{name}: volume {source} is not declared"
                used.add(source)
        for dependency in service.get("depends_on", []):
            assert dependency in services, f"{name} depends on unknown service {dependency}"
    assert used == declared


@pytest.mark.parametrize(
    ("service", "flag", "config"),
    [
        ("collector", "--config", COLLECTOR_FILE),
        ("jaeger", "--config", JAEGER_FILE),
        ("tempo", "-config.file", TEMPO_FILE),
        ("prometheus", "--config.file", PROMETHEUS_FILE),
    ],
)
def test_each_service_reads_the_config_file_mounted_into_it(
    services: dict[str, Any], service: str, flag: str, config: Path
) -> None:
    path = flag_value(command_of(services[service]), flag)
    assert path, f"{service}: command has no {flag}"
    assert host_path(services[service], path) == config.resolve(), (
        f"{service}: {path} is not {config.relative_to(ROOT)}"
    )


def test_tempo_stores_on_its_volume(services: dict[str, Any]) -> None:
    tempo = load_yaml(TEMPO_FILE)
    volume_targets = [target for source, target in mounts(services["tempo"]) if not source.startswith(".")]
    for path in (tempo["storage"]["trace"]["wal"]["path"], tempo["storage"]["trace"]["local"]["path"]):
        assert any(path.startswith(t + "/") for t in volume_targets), f"tempo writes {path} outside its volume"
    assert "-target=all" in command_of(services["tempo"])
    assert tempo["storage"]["trace"]["backend"] == "local"
    assert "ingester" not in tempo and "compactor" not in tempo, "Tempo 3 monolithic rejects these 2.x blocks"
    init = services["tempo-init"]
    assert mounts(init) == [(s, t) for s, t in mounts(services["tempo"]) if not s.startswith(".")]
    assert services["tempo"]["depends_on"]["tempo-init"]["condition"] == "service_completed_successfully"


def test_jaeger_keeps_traces_in_memory_and_serves_the_ui() -> None:
    jaeger = load_yaml(JAEGER_FILE)
    storage = jaeger["extensions"]["jaeger_query"]["storage"]["traces"]
    assert "memory" in jaeger["extensions"]["jaeger_storage"]["backends"][storage]
    assert jaeger["exporters"]["jaeger_storage_exporter"]["trace_storage"] == storage
    assert port_of(jaeger["extensions"]["jaeger_query"]["http"]["endpoint"]) == 16686


def test_prometheus_loads_the_rules_and_scrapes_what_services_expose(
    services: dict[str, Any], collector: dict[str, Any]
) -> None:
    config = load_yaml(PROMETHEUS_FILE)
    prometheus = services["prometheus"]
    loaded = set()
    for pattern in config["rule_files"]:
        directory = host_path(prometheus, str(Path(pattern).parent))
        assert directory is not None, f"rule_files {pattern} is not mounted into prometheus"
        loaded |= {p.resolve() for p in directory.glob(Path(pattern).name)}
    assert RULES_FILE.resolve() in loaded
    listening = listen_ports(services, collector)
    listening["localhost"] = listening["prometheus"]
    scraped = {}
    for job in config["scrape_configs"]:
        for static in job["static_configs"]:
            for target in static["targets"]:
                host, port = host_of(target), port_of(target)
                assert port in listening.get(host, set()), f"job {job['job_name']}: nothing listens on {target}"
                scraped[(host, port)] = job
    exporter_job = scraped[("collector", port_of(collector["exporters"]["prometheus"]["endpoint"]))]
    assert exporter_job.get("honor_labels") is True, "keep the job label the collector derives from service.name"


# --- the demo service ---------------------------------------------------------------------------------


def test_demo_service_runs_the_cli_demo_against_the_collector(
    services: dict[str, Any], collector: dict[str, Any]
) -> None:
    demo = services["demo"]
    assert (ROOT / demo["build"]["context"] / demo["build"]["dockerfile"]).resolve() == DOCKERFILE.resolve()
    dockerfile = DOCKERFILE.read_text()
    installed = re.search(r"^RUN pip install '\.\[([\w,]+)\]'", dockerfile, re.M)
    assert installed, "the image installs this package with its extras"
    # what the compose services run: the demo (OTLP export, --judge), serve with its Prometheus port (the scorer's
    # serve.prometheus_port), and the replicas' Redis budget ledger
    extras = set(installed.group(1).split(","))
    assert {"serve", "judge", "redis", "prometheus"} <= extras, "a missing extra is an exit 2 in the container"
    entrypoint = json.loads(re.findall(r"^ENTRYPOINT\s+(\[.*\])", dockerfile, re.M)[-1])
    assert entrypoint == ["otel-toolcall-eval"]
    default_cmd = json.loads(re.findall(r"^CMD\s+(\[.*\])", dockerfile, re.M)[-1])
    grpc_port = port_of(collector["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"])
    for argv in (command_of(demo), default_cmd):
        args = build_parser().parse_args(argv)  # the real CLI parser: every flag must exist
        assert args.command == "demo"
        assert host_of(args.otlp_endpoint) == "collector" and port_of(args.otlp_endpoint) == grpc_port
        assert args.otlp_protocol == "grpc"
        assert args.traces_per_second and args.traces_per_second > 0
        assert args.duration and args.duration >= 3600
    # the shipped dashboard's judge panels are fed by the demo's judge (its scripted stand-in, demo.judge)
    assert build_parser().parse_args(command_of(demo)).judge
    assert "collector" in demo["depends_on"]


# --- the scoring service (scorer) -----------------------------------------------------------------------
# Docker does not run here: the scorer's compose entry is checked against the CLI's real parser, the config file
# it mounts (loaded and validated as `serve` loads it) and the collector config that feeds and receives it; its
# health check command is run against a real service started from that config on 127.0.0.1.


def receiver_ports(collector: Mapping[str, Any], receiver_id: str) -> dict[str, int]:
    return {proto: port_of(p["endpoint"]) for proto, p in collector["receivers"][receiver_id]["protocols"].items()}


def test_scorer_runs_serve_from_the_image_with_its_mounted_config(services: dict[str, Any]) -> None:
    scorer, demo = services["scorer"], services["demo"]
    assert scorer["build"] == demo["build"] and scorer["image"] == demo["image"], "the same image as the demo"
    dockerfile = DOCKERFILE.read_text()
    entrypoint = json.loads(re.findall(r"^ENTRYPOINT\s+(\[.*\])", dockerfile, re.M)[-1])
    scripts = {e.name: e for e in importlib.metadata.entry_points(group="console_scripts")}
    assert entrypoint[0] in scripts, f"ENTRYPOINT {entrypoint} is not a console script of the package"
    assert scripts[entrypoint[0]].load() is main, "the ENTRYPOINT is the CLI that build_parser() parses for"
    exposed = {int(p) for line in re.findall(r"^EXPOSE\s+(.+)$", dockerfile, re.M) for p in line.split()}
    serve = scorer_settings(scorer).serve
    assert serve.host == "0.0.0.0", "inside the compose network the receivers must not bind loopback only"
    assert {serve.grpc_port, serve.http_port, serve.prometheus_port} <= exposed
    assert not scorer.get("ports"), "the scorer is reached through the collector: no host port"
    assert "collector" in scorer["depends_on"]
    grace = scorer["stop_grace_period"]
    assert grace.endswith("s") and float(grace[:-1]) > serve.shutdown_timeout_seconds, "SIGKILL before the drain"


def test_the_collector_feeds_the_scorer_and_fans_its_output_out(
    services: dict[str, Any], collector: dict[str, Any]
) -> None:
    config = scorer_settings(services["scorer"])
    serve = config.serve
    pipelines = collector["service"]["pipelines"]
    # agents without the processor -> otlp/agents -> otlp_grpc/scorer -> the scorer's gRPC receiver
    agents = pipelines["traces/agents"]
    assert agents["receivers"] == ["otlp/agents"] and agents["exporters"] == ["otlp_grpc/scorer"]
    exporter = collector["exporters"]["otlp_grpc/scorer"]
    assert (host_of(exporter["endpoint"]), port_of(exporter["endpoint"])) == ("scorer", serve.grpc_port)
    assert exporter["retry_on_failure"]["enabled"] and exporter["sending_queue"]["enabled"], (
        "a full scorer answers UNAVAILABLE: the collector must retry and queue, not drop"
    )
    published = dict(published_ports(services["collector"]))
    assert set(receiver_ports(collector, "otlp/agents").values()) <= set(published.values())
    # the scorer's next hop -> otlp/scored, fanned out with the rest; its log records have a pipeline too
    export = serve.export
    assert export.protocol == "grpc" and host_of(export.endpoint or "") == "collector"
    assert port_of(export.endpoint or "") == receiver_ports(collector, "otlp/scored")["grpc"]
    assert port_of(export.endpoint or "") not in published.values(), "the scored-spans receiver stays internal"
    assert "otlp/scored" in pipelines["traces"]["receivers"]
    assert config.sessions.enabled and "otlp/scored" in pipelines["logs"]["receivers"], (
        "session verdicts go out as OTLP logs to the same endpoint: the collector needs a logs pipeline"
    )
    assert "otlp/scored" not in agents["receivers"], "scored spans must not be sent to the scorer again"


def test_the_scorer_health_check_asks_readyz_of_a_real_service(services: dict[str, Any]) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_toolcall_eval.serve import Service

    check = services["scorer"]["healthcheck"]
    test = check["test"]
    assert test[0] == "CMD" and test[1] == "python", "python is what the image has (FROM python:...)"
    config = scorer_settings(services["scorer"])
    url = re.search(r"http://127\.0\.0\.1:(\d+)(/\w+)", test[-1])
    assert url and (int(url.group(1)), url.group(2)) == (config.serve.http_port, "/readyz")
    local = config.serve.model_copy(update={"host": "127.0.0.1", "http_port": 0, "grpc_port": 0})
    svc = Service(config.model_copy(update={"serve": local}), span_exporter=InMemorySpanExporter())
    svc.start()
    argv = [sys.executable, *test[2:-1], test[-1].replace(f":{url.group(1)}/", f":{svc.http_port}/")]
    try:
        assert subprocess.run(argv, timeout=30, check=False).returncode == 0, "ready service reported unhealthy"
        svc.intake.closing = True  # what SIGTERM does first: /readyz 503
        assert subprocess.run(argv, timeout=30, check=False, capture_output=True).returncode != 0
    finally:
        svc.stop(timeout=10)


# --- the gateway tier (profile gateway) ------------------------------------------------------------------
# Docker and the Collector binary cannot run here: the profile is checked statically, the replicas' config as
# serve loads it, and the trace-id routing itself by tests/integration/test_gateway_routing.py.

GATEWAY_TIER = ("gateway", "toolcall-eval-1", "toolcall-eval-2", "redis")


def test_the_gateway_tier_is_a_profile_off_by_default(services: dict[str, Any]) -> None:
    for name, service in services.items():
        if name in GATEWAY_TIER:
            assert service.get("profiles") == ["gateway"], f"{name} must start only with --profile gateway"
        else:
            assert "profiles" not in service, f"{name} is part of the default stack"
            assert not set(service.get("depends_on", [])) & set(GATEWAY_TIER), f"{name} needs the gateway profile"


def test_the_gateway_routes_by_trace_id_to_every_replica_and_only_to_them(services: dict[str, Any]) -> None:
    gateway = load_yaml(GATEWAY_FILE)
    assert host_path(services["gateway"], flag_value(command_of(services["gateway"]), "--config") or "") == (
        GATEWAY_FILE.resolve()
    )
    assert services["gateway"]["image"] == services["collector"]["image"], "one collector version"
    balancer = gateway["exporters"]["load_balancing"]
    assert balancer["routing_key"] == "traceID"
    targets = {(host_of(h), port_of(h)) for h in balancer["resolver"]["static"]["hostnames"]}
    replicas = {name for name in services if name.startswith("toolcall-eval-")}
    assert {host for host, _ in targets} == replicas, "the resolver lists exactly the compose replicas"
    for name in replicas:
        replica = services[name]
        assert replica["image"] == services["scorer"]["image"] and command_of(replica)[0] == "serve"
        serve = scorer_settings(replica, REPLICA_FILE).serve
        assert serve.host == "0.0.0.0"
        assert (name, serve.grpc_port) in targets, f"{name} does not listen where the gateway sends"
        assert not replica.get("ports"), "a replica is reached through the gateway only"
        assert set(services["gateway"]["depends_on"]) >= {name}


def test_the_replicas_share_one_redis_and_export_to_the_collector(
    services: dict[str, Any], collector: dict[str, Any]
) -> None:
    first, second = services["toolcall-eval-1"], services["toolcall-eval-2"]
    assert first == second, "identical replicas (one anchor)"
    url = first["environment"]["TOOLCALL_EVAL_REDIS_URL"]
    assert (host_of(url.split("//")[1].split("/")[0]), port_of(url.split("//")[1].split("/")[0])) == ("redis", 6379)
    assert "TOOLCALL_EVAL_REDIS_URL" in REPLICA_FILE.read_text(), "the config's comment names the variable"
    assert "redis" in first["depends_on"]
    export = scorer_settings(first, REPLICA_FILE).serve.export
    assert host_of(export.endpoint or "") == "collector"
    assert port_of(export.endpoint or "") == receiver_ports(collector, "otlp/scored")["grpc"]
    grace = first["stop_grace_period"]
    assert float(grace[:-1]) > scorer_settings(first, REPLICA_FILE).serve.shutdown_timeout_seconds


# --- Grafana --------------------------------------------------------------------------------------------


def test_grafana_provisioning_is_mounted_where_grafana_reads_it(
    services: dict[str, Any], dashboard: dict[str, Any]
) -> None:
    grafana = services["grafana"]
    for kind, file in (
        ("datasources", DATASOURCES_FILE),
        ("dashboards", DASHBOARD_PROVIDER_FILE),
        ("alerting", GRAFANA_ALERTS_FILE),
    ):
        assert host_path(grafana, f"/etc/grafana/provisioning/{kind}/{file.name}") == file.resolve()
    provider = load_yaml(DASHBOARD_PROVIDER_FILE)["providers"][0]
    assert provider["type"] == "file"
    dashboards_dir = host_path(grafana, provider["options"]["path"])
    assert dashboards_dir is not None
    for file in (DASHBOARD_FILE, TRACES_DASHBOARD_FILE):
        assert (dashboards_dir / file.name).resolve() == file.resolve()
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert host_path(grafana, home) == DASHBOARD_FILE.resolve()


def datasource_uids() -> dict[str, dict[str, Any]]:
    sources = load_yaml(DATASOURCES_FILE)["datasources"]
    uids = [s["uid"] for s in sources]
    assert len(uids) == len(set(uids)), "data-source UIDs must be unique"
    return {s["uid"]: s for s in sources}


def test_grafana_datasources_point_at_the_services(services: dict[str, Any], collector: dict[str, Any]) -> None:
    sources = datasource_uids()
    assert {s["type"] for s in sources.values()} == {"prometheus", "tempo", "jaeger"}
    listening = listen_ports(services, collector)
    for source in sources.values():
        host, port = host_of(source["url"]), port_of(source["url"])
        assert host == source["type"], f"data source {source['name']} points at {host}"
        assert port in listening[host], f"data source {source['name']}: {host} does not listen on {port}"
    for destination in sources["prometheus"]["jsonData"]["exemplarTraceIdDestinations"]:
        assert destination["datasourceUid"] in sources


def test_trace_datasources_link_to_span_metrics(collector: dict[str, Any], known_metrics: dict[str, set[str]]) -> None:
    span_metrics = span_metric_names(collector)
    for source in datasource_uids().values():
        if source["type"] not in {"tempo", "jaeger"}:
            continue
        links = source["jsonData"]["tracesToMetrics"]
        assert links["datasourceUid"] in datasource_uids()
        labels = {tag.get("value") or tag["key"] for tag in links["tags"]}
        for tag in links["tags"]:
            assert tag["key"] in KNOWN_ATTRIBUTES | {"service.name"}, f"{source['name']}: tag {tag['key']}"
        assert labels <= span_metrics[next(iter(span_metrics))], f"{source['name']}: tags map to unknown labels"
        assert links["queries"]
        for query in links["queries"]:
            assert "$$__tags" in query["query"], "escape $__tags as $$__tags in provisioning files"
            expr = query["query"].replace("$$__tags", 'service_name="demo"')
            parsed = parse_promql(expr, f"{source['name']} tracesToMetrics {query['name']}")
            check_metric_names(parsed, known_metrics, set(), f"{source['name']} tracesToMetrics")
            assert {name for name, _ in selectors(parsed)} <= set(span_metrics)


@pytest.mark.parametrize(
    ("file", "uid"), [(DASHBOARD_FILE, "toolcall-eval"), (TRACES_DASHBOARD_FILE, "toolcall-eval-traces")]
)
def test_dashboard_panels_are_well_formed(file: Path, uid: str) -> None:
    dashboard = load_dashboard(file)
    assert dashboard["uid"] == uid
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    cells: dict[tuple[int, int], int] = {}
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, f"panel {panel['id']} is wider than the grid"
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, f"panels {cells[(x, y)]} and {panel['id']} overlap"
                cells[(x, y)] = panel["id"]
    sources = datasource_uids()
    for panel, target in iter_dashboard_targets(dashboard):
        for ref in (panel["datasource"], target["datasource"]):
            assert ref["uid"] in sources and sources[ref["uid"]]["type"] == ref["type"], f"panel {panel['id']}: {ref}"


def test_dashboard_promql_uses_metrics_the_processor_emits(
    dashboard: dict[str, Any], known_metrics: dict[str, set[str]]
) -> None:
    used: set[str] = set()
    for panel, target in iter_dashboard_targets(dashboard):
        if target["datasource"]["type"] != "prometheus":
            continue
        where = f"dashboard panel {panel['id']} ({panel['title']}) {target['refId']}"
        parsed = parse_promql(grafana_expr(target["expr"]), where)
        check_metric_names(parsed, known_metrics, set(), where)
        used |= {name for name, _ in selectors(parsed)}
    for variable in dashboard["templating"]["list"]:
        query = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", variable["query"]["query"])
        assert query, f"variable {variable['name']}: not label_values(selector, label)"
        selector, label = query.groups()
        parsed = parse_promql(grafana_expr(selector), f"variable {variable['name']}")
        check_metric_names(parsed, known_metrics, set(), f"variable {variable['name']}")
        for name, _ in selectors(parsed):
            assert label in known_metrics[name] | TARGET_LABELS, f"variable {variable['name']}: {name} has no {label}"
    # The panels the issue asks for are there.
    assert {
        "toolcall_eval_traces_total",
        "toolcall_eval_tool_calls_total",
        "toolcall_eval_violations_total",
        "toolcall_eval_judge_verdicts_total",
        "toolcall_eval_judge_cost_total",
    } <= used
    exprs = " ".join(t["expr"] for _, t in iter_dashboard_targets(dashboard) if "expr" in t)
    assert 'composite_ok="false"' in exprs and 'violation="schema_invalid"' in exprs
    assert "by (tool, outcome)" in exprs and "by (question, label)" in exprs


def test_dashboard_links_open_the_failing_traces_in_tempo(
    dashboard: dict[str, Any], traces_dashboard: dict[str, Any]
) -> None:
    queries = []
    for panel in dashboard["panels"] + traces_dashboard["panels"]:
        for link in panel["fieldConfig"]["defaults"].get("links", []):
            for pane in explore_panes(link["url"]).values():
                assert pane["datasource"] == "tempo"
                for query in pane["queries"]:
                    assert query["datasource"] == {"type": "tempo", "uid": "tempo"}
                    assert query["queryType"] == "traceql"
                    check_traceql(query["query"], f"panel {panel['id']} link")
                    queries.append(query["query"])
        for target in panel.get("targets", []):
            if target["datasource"]["type"] == "tempo":
                check_traceql(target["query"], f"panel {panel['id']}")
                queries.append(target["query"])
    assert "{ span.toolcall_eval.trace.composite_ok = false }" in queries
    assert "{ span.toolcall_eval.schema_valid = false }" in queries


def test_only_the_traces_dashboard_needs_the_collector_or_tempo(
    dashboard: dict[str, Any], traces_dashboard: dict[str, Any], collector: dict[str, Any]
) -> None:
    """The main dashboard reads the processor's metrics only (the demo alone fills it); what needs the Collector's
    span_metrics connector or Tempo is on the traces dashboard, and each links to the other."""
    span_metrics = set(span_metric_names(collector))
    kinds: dict[str, set[str]] = {"main": set(), "traces": set()}
    for kind, board in (("main", dashboard), ("traces", traces_dashboard)):
        for panel, target in iter_dashboard_targets(board):
            if target["datasource"]["type"] == "tempo":
                kinds[kind].add("tempo")
                continue
            names = {name for name, _ in selectors(parse_promql(grafana_expr(target["expr"]), panel["title"]))}
            kinds[kind] |= {"span_metrics" if name in span_metrics else "processor" for name in names}
    assert kinds == {"main": {"processor"}, "traces": {"tempo", "span_metrics"}}
    assert traces_dashboard["templating"]["list"] == [], "no variable of the processor's metrics there"
    assert [link["url"] for link in dashboard["links"]] == [f"/d/{traces_dashboard['uid']}"]
    assert [link["url"] for link in traces_dashboard["links"]] == [f"/d/{dashboard['uid']}"]


def test_traces_dashboard_promql_uses_the_span_metrics_the_collector_emits(
    traces_dashboard: dict[str, Any], known_metrics: dict[str, set[str]]
) -> None:
    for panel, target in iter_dashboard_targets(traces_dashboard):
        if target["datasource"]["type"] == "prometheus":
            where = f"traces dashboard panel {panel['id']} ({panel['title']})"
            check_metric_names(parse_promql(grafana_expr(target["expr"]), where), known_metrics, set(), where)


# --- alert rules: Prometheus and Grafana ----------------------------------------------------------------


def test_prometheus_rules_use_metrics_the_processor_emits(
    rules: list[dict[str, Any]], known_metrics: dict[str, set[str]]
) -> None:
    recorded = {r["record"] for r in rules if "record" in r}
    for rule in rules:
        name = rule.get("record") or rule["alert"]
        parsed = parse_promql(rule["expr"], f"rule {name}")
        check_metric_names(parsed, known_metrics, recorded, f"rule {name}")
        for metric, _ in selectors(parsed):
            assert metric in recorded or metric.startswith("toolcall_eval_"), f"rule {name} reads {metric}"
    for rule in rules:
        if "record" in rule:
            level, metric, operation = rule["record"].split(":")
            window = re.search(r"(?:rate|increase)(\d+[smhd])$", operation)
            assert window, f"recording rule {rule['record']}: name does not end in its window"
            assert ranges(pq.parse(rule["expr"])) == {pq.parse_duration(window.group(1))}, rule["record"]
            grouping = {"job": "by (job)", "agent": "by (job, service_name, gen_ai_agent_name)"}
            grouping["version"] = "by (job, service_name, gen_ai_agent_name, service_version)"
            assert level in grouping and grouping[level] in rule["expr"], rule["record"]
        else:
            assert rule.get("for"), f"alert {rule['alert']} has no for: duration"
            assert rule["labels"]["severity"] in {"warning", "critical"}
            assert rule["annotations"]["summary"] and rule["annotations"]["description"]
            if "traceql" in rule["annotations"]:
                check_traceql(rule["annotations"]["traceql"], f"alert {rule['alert']}")


def composite_alerts(rules: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    recorded = {r["record"]: pq.parse(r["expr"]) for r in rules if "record" in r}

    def reads_traces(expr: pq.Expr) -> bool:
        names = {n for n, _ in selectors(expr)}
        return "toolcall_eval_traces_total" in names or any(reads_traces(recorded[n]) for n in names & set(recorded))

    return {r["alert"]: r for r in rules if "alert" in r and reads_traces(pq.parse(r["expr"]))}


def test_composite_alerts_have_a_volume_guard_and_a_burn_rate_pair(rules: list[dict[str, Any]]) -> None:
    recorded = {r["record"]: pq.parse(r["expr"]) for r in rules if "record" in r}
    alerts = composite_alerts(rules)
    assert set(alerts) == {
        "ToolCallCompositeOkRateLow",
        "ToolCallCompositeErrorBudgetFastBurn",
        "ToolCallCompositeErrorBudgetSlowBurn",
        "ToolCallVersionRegressed",
    }
    for name, rule in alerts.items():
        expr = pq.parse(rule["expr"])
        assert any(op == ">=" and value >= 10 for op, value in thresholds(expr)), f"{name}: no minimum-volume guard"
        assert 'composite_ok="false"' in rule["expr"] or any(
            'composite_ok="false"' in str(recorded[n]) for n, _ in selectors(expr) if n in recorded
        ), f"{name}: use the error ratio (an ok ratio is empty while every trace fails)"
    hour = timedelta(hours=1)
    minute = timedelta(minutes=1)
    fast = pq.parse(alerts["ToolCallCompositeErrorBudgetFastBurn"]["expr"])
    slow = pq.parse(alerts["ToolCallCompositeErrorBudgetSlowBurn"]["expr"])
    assert ranges(fast, recorded) == {hour, 5 * minute}
    assert ranges(slow, recorded) == {6 * hour, 30 * minute}
    assert (">", 0.72) in thresholds(fast) and (">", 0.3) in thresholds(slow)


def grafana_rules() -> dict[str, dict[str, Any]]:
    groups = load_yaml(GRAFANA_ALERTS_FILE)["groups"]
    return {rule["uid"]: rule for group in groups for rule in group["rules"]}


def test_grafana_alert_rules_are_well_formed(dashboard: dict[str, Any], known_metrics: dict[str, set[str]]) -> None:
    sources = datasource_uids()
    panel_ids = {p["id"] for p in dashboard["panels"]}
    rules = grafana_rules()
    assert rules
    for uid, rule in rules.items():
        refs = {d["refId"] for d in rule["data"]}
        assert rule["condition"] in refs, f"grafana rule {uid}: condition {rule['condition']} is not a query"
        assert rule["dashboardUid"] == dashboard["uid"] and rule["panelId"] in panel_ids
        assert rule["for"] and rule["labels"]["severity"]
        for query in rule["data"]:
            assert query["datasourceUid"] == "__expr__" or query["datasourceUid"] in sources
            assert query["model"]["refId"] == query["refId"]
            if query["datasourceUid"] == "prometheus":
                parsed = parse_promql(query["model"]["expr"], f"grafana rule {uid} {query['refId']}")
                check_metric_names(parsed, known_metrics, set(), f"grafana rule {uid}")
            else:
                expression = query["model"].get("expression", "")
                for ref in re.findall(r"\$(\w+)", expression) or [expression]:
                    assert ref in refs, f"grafana rule {uid}: expression refers to unknown {ref}"


def grafana_rule_shape(rule: dict[str, Any]) -> tuple[set[timedelta], set[float]]:
    """Windows and thresholds of a Grafana rule: its PromQL plus its threshold/math expressions."""
    windows: set[timedelta] = set()
    values: set[float] = set()
    for query in rule["data"]:
        model = query["model"]
        if query["datasourceUid"] == "prometheus":
            parsed = pq.parse(model["expr"])
            windows |= ranges(parsed)
            values |= {v for _, v in thresholds(parsed)}
        elif model["type"] == "threshold":
            values |= {float(p) for c in model["conditions"] for p in c["evaluator"]["params"]}
        elif model["type"] == "math":
            values |= {float(v) for v in re.findall(r"[<>]=?\s*([\d.]+)", model["expression"])}
    return windows, values


@pytest.mark.parametrize(
    ("grafana_uid", "alert"),
    [
        ("toolcall-composite-ok-low", "ToolCallCompositeOkRateLow"),
        ("toolcall-composite-fast-burn", "ToolCallCompositeErrorBudgetFastBurn"),
    ],
)
def test_grafana_alerts_match_the_prometheus_rules(rules: list[dict[str, Any]], grafana_uid: str, alert: str) -> None:
    recorded = {r["record"]: pq.parse(r["expr"]) for r in rules if "record" in r}
    prometheus_rule = composite_alerts(rules)[alert]
    expr = pq.parse(prometheus_rule["expr"])
    grafana_rule = grafana_rules()[grafana_uid]
    assert grafana_rule_shape(grafana_rule) == (ranges(expr, recorded), {v for _, v in thresholds(expr)})
    assert pq.parse_duration(grafana_rule["for"]) == pq.parse_duration(prometheus_rule["for"])
    assert grafana_rule["labels"]["severity"] == prometheus_rule["labels"]["severity"]


# --- promtool --------------------------------------------------------------------------------------------

promtool = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(promtool is None, reason="promtool not installed (Debian package prometheus)")


def run_promtool(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run promtool; the timeout guards against a hang, not a slow machine (its rule tests take ~14 s of CPU,
    close to a minute of wall time on 2 loaded cores)."""
    assert promtool is not None
    return subprocess.run([promtool, *args], cwd=cwd, capture_output=True, text=True, timeout=600, check=False)


@needs_promtool
def test_promtool_check_rules() -> None:
    result = run_promtool("check", "rules", str(RULES_FILE))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@needs_promtool
def test_promtool_unit_tests_pass() -> None:
    assert RULE_TESTS, "no promtool unit tests in deploy/prometheus/tests"
    result = run_promtool("test", "rules", *map(str, RULE_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(RULE_TESTS)


def test_promtool_unit_tests_cover_firing_and_silent_cases_of_every_alert(rules: list[dict[str, Any]]) -> None:
    firing: set[str] = set()
    silent: set[str] = set()
    for path in RULE_TESTS:
        suite = load_yaml(path)
        assert [(path.parent / f).resolve() for f in suite["rule_files"]] == [RULES_FILE.resolve()]
        for case in suite["tests"]:
            for check in case.get("alert_rule_test", []):
                (firing if check["exp_alerts"] else silent).add(check["alertname"])
    alerts = {r["alert"] for r in rules if "alert" in r}
    assert alerts <= firing, f"no firing case for {sorted(alerts - firing)}"
    assert alerts <= silent, f"no silent case for {sorted(alerts - silent)}"


def promtool_with_rules_changed(tmp_path: Path, old: str, new: str, suites: list[Path]) -> str:
    """``promtool test rules`` of ``suites`` against the shipped rules with ``old`` replaced by ``new``: its output
    when it fails (an assertion error when it passes)."""
    (tmp_path / "rules").mkdir()
    (tmp_path / "tests").mkdir()
    text = RULES_FILE.read_text()
    assert old in text
    (tmp_path / "rules" / RULES_FILE.name).write_text(text.replace(old, new))
    for path in suites:
        (tmp_path / "tests" / path.name).write_text(path.read_text())
    result = run_promtool("test", "rules", *(str(tmp_path / "tests" / p.name) for p in suites), cwd=tmp_path)
    assert result.returncode != 0
    return result.stdout + result.stderr


@needs_promtool
def test_promtool_unit_tests_catch_a_changed_threshold(tmp_path: Path) -> None:
    """The unit tests are not vacuous: loosening the composite floor to 50 % makes them fail."""
    suites = [p for p in RULE_TESTS if "ToolCallCompositeOkRateLow" in p.read_text()]
    assert "ToolCallCompositeOkRateLow" in promtool_with_rules_changed(tmp_path, ") > 0.10\n", ") > 0.50\n", suites)


@needs_promtool
def test_promtool_unit_tests_catch_a_wider_version_margin(tmp_path: Path) -> None:
    """The version alert's tests are not vacuous: a 25-point margin instead of 5 lets the regressed version pass."""
    suite = DEPLOY / "prometheus" / "tests" / "versions.test.yml"
    output = promtool_with_rules_changed(tmp_path, "ratio_increase1d - 0.05)", "ratio_increase1d - 0.25)", [suite])
    assert "ToolCallVersionRegressed" in output


# --- the docs ------------------------------------------------------------------------------------------------


def test_deployment_doc_queries_are_valid(known_metrics: dict[str, set[str]], rules: list[dict[str, Any]]) -> None:
    text = DEPLOYMENT_DOC.read_text()
    recorded = {r["record"] for r in rules if "record" in r}
    traceql = re.findall(r"```traceql\n(.*?)```", text, re.S)
    promql = re.findall(r"```promql\n(.*?)```", text, re.S)
    assert traceql and promql
    for block in traceql:
        for line in filter(None, (line.strip() for line in block.splitlines())):
            check_traceql(line, "docs/deployment.md")
    for block in promql:
        parsed = parse_promql(block, "docs/deployment.md")
        check_metric_names(parsed, known_metrics, recorded, "docs/deployment.md")
    floor = composite_alerts(rules)["ToolCallCompositeOkRateLow"]["expr"].strip()
    assert floor in text, "docs/deployment.md shows the composite alert's PromQL as shipped"
    for name in (
        "ToolCallCompositeOkRateLow",
        "ToolCallCompositeErrorBudgetFastBurn",
        "ToolCallCompositeErrorBudgetSlowBurn",
    ):
        assert name in text


def test_metric_table_matches_what_the_exporter_emits(emitted: dict[str, set[str]]) -> None:
    """The processor's METRICS table names the series the real Prometheus exporter produces."""
    documented = {doc.prometheus: doc for doc in METRICS}
    for name, labels in emitted.items():
        base = re.sub(r"_(sum|count)$", "_bucket", name) if name.endswith(("_sum", "_count")) else name
        assert base in documented, f"the exporter emits {name}, which METRICS does not list"
        expected = {label.replace(".", "_") for label in re.findall(r"`([\w.]+)`", documented[base].labels)}
        assert expected <= labels, f"{name}: METRICS lists labels {sorted(expected)}, exporter has {sorted(labels)}"
    for doc in METRICS:
        assert doc.prometheus in emitted or ".judge." in doc.name, f"METRICS lists {doc.prometheus}; nothing emits it"
