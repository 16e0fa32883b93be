"""End to end: every panel of the shipped Grafana dashboard shows data from a real run of the shipped config.

Real parts only: two demo agents (``python -m otel_toolcall_eval.cli demo`` with the demo's own config, the one the
compose stack runs) of one service in two versions (``OTEL_RESOURCE_ATTRIBUTES=service.version=...``, as a
deployment sets it) expose the processor's metrics through the SDK's Prometheus exporter; a real Prometheus scrapes
both every second. Each panel's queries are sent to it as Grafana would, its variables filled with what the
variables' own queries return (the newer version as Version, the older as Previous version), and a panel shows data
when one of its queries returns a series.

The panels fed by parts that cannot run here are listed in ``NOT_FROM_THE_DEMO`` with the reason; the test fails
when one of them starts showing data (the list is then stale) or when any other panel is empty.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import free_port

from . import prometheus_server
from .prometheus_server import JOB, NEEDS_PROMETHEUS, Processes, PrometheusAPI, run_prometheus, wait_for

processes = prometheus_server.processes  # the fixture: every process started is stopped at teardown

pytestmark = [pytest.mark.integration, NEEDS_PROMETHEUS]

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "toolcall-eval.json"
VERSIONS = ("1.4.0", "1.5.0")  # the older serves first, as in a deployment
# Panels whose metrics come from parts the demo does not run, by panel title: what feeds them.
NOT_FROM_THE_DEMO = {
    "Judge spend (time range)": "the LLM judge (`judge:` config and a model endpoint)",
    "Judge verdicts": "the LLM judge",
    "Judge spend": "the LLM judge",
    "Judge agreement with people (kappa)": "the LLM judge and `judge agreement --calibration`",
    "Judge verdict share by label (drift)": "the LLM judge",
    "Session verdicts": "conversation ids on the agent's spans (the demo's traces carry none)",
    "Turns per session (p50, p95) and session state dropped": "conversation ids on the agent's spans",
    "Guard decisions by tool (blocked, held for approval, warned)": "the pre-execution guard in the application",
    "Guard findings by policy": "the pre-execution guard in the application",
    "Tool-list changes": "an agent whose offered tool list changes (the demo's never does)",
}
RATE_INTERVAL = "15s"  # Grafana's $__rate_interval: at least four scrape intervals
RANGE = "1m"  # $__range: the run's length, about


def start_demo(processes: Processes, port: int, version: str) -> None:
    argv = [sys.executable, "-m", "otel_toolcall_eval.cli", "demo", "--prometheus-port", str(port)]
    argv += ["--traces-per-second", "10", "--duration", "180", "--failure-rate", "0.1", "--show", "0"]
    env = dict(os.environ, OTEL_RESOURCE_ATTRIBUTES=f"service.version={version}")
    processes.start(f"demo-{version}", argv, env=env)


def fill(expr: str, variables: dict[str, str]) -> str:
    expr = expr.replace("$__rate_interval", RATE_INTERVAL).replace("$__range", RANGE)
    return re.sub(r"\$(\w+)", lambda m: variables[m.group(1)], expr)


def variable_values(api: PrometheusAPI, dashboard: dict[str, Any], chosen: dict[str, str]) -> dict[str, str]:
    """Each variable's value, in order (a variable's query reads the ones before it): the chosen value, which its
    query must offer, else its All value."""
    values: dict[str, str] = {}
    for variable in dashboard["templating"]["list"]:
        match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", variable["query"]["query"])
        assert match, variable["name"]
        selector, label = match.groups()
        found = api.get("/api/v1/series", **{"match[]": fill(selector, values)})
        offered = sorted({series[label] for series in found if label in series})
        name = variable["name"]
        if name in chosen:
            assert chosen[name] in offered, f"variable {name} offers {offered}"
            values[name] = chosen[name]
        else:
            assert offered, f"variable {name} offers nothing"
            values[name] = variable["allValue"]
    return values


def test_every_panel_shows_data_from_the_shipped_demo_config(tmp_path: Path, processes: Processes) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    ports = [free_port() for _ in VERSIONS]
    for port, version in zip(ports, VERSIONS, strict=True):
        start_demo(processes, port, version)
    api = run_prometheus(processes, tmp_path, [f"127.0.0.1:{p}" for p in ports], [])
    # every series the panels read has had time for a few scrapes: both versions' traces, the histograms' too
    for version in VERSIONS:
        wait_for(
            f"traces of version {version}",
            lambda v=version: (api.scalar(f'sum(toolcall_eval_traces_total{{service_version="{v}"}})') or 0) > 50,
            processes,
            60,
        )
    wait_for(
        "20 s of scrapes", lambda: (api.scalar(f'count_over_time(up{{job="{JOB}"}}[1m])') or 0) >= 20, processes, 60
    )
    processes.check_alive()

    variables = variable_values(api, dashboard, {"version": VERSIONS[1], "previous": VERSIONS[0]})
    empty: dict[str, list[str]] = {}  # panel title -> its queries, for a panel none of whose queries returns a series
    for panel in dashboard["panels"]:
        queries = [fill(t["expr"], variables) for t in panel["targets"] if t["datasource"]["type"] == "prometheus"]
        if not any(api.get("/api/v1/query", query=query)["result"] for query in queries):
            empty[panel["title"]] = queries
    unexpected = {title: queries for title, queries in empty.items() if title not in NOT_FROM_THE_DEMO}
    assert not unexpected, "panels without data:\n" + "\n".join(f"{t}: {q}" for t, q in unexpected.items())
    stale = set(NOT_FROM_THE_DEMO) - set(empty)
    assert not stale, f"these panels show data (or are gone): drop them from NOT_FROM_THE_DEMO: {sorted(stale)}"
    # the comparison panels compare the two versions: both appear
    for title in (
        "This version against the previous: composite ok-rate",
        "This version against the previous: tool-call outcomes",
    ):
        panel = next(p for p in dashboard["panels"] if p["title"] == title)
        versions = {
            series["metric"].get("service_version")
            for target in panel["targets"]
            for series in api.get("/api/v1/query", query=fill(target["expr"], variables))["result"]
        }
        assert versions == set(VERSIONS), (title, versions)
