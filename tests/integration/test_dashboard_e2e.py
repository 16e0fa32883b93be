"""End to end: every panel of the shipped Grafana dashboard shows data from a real run of the shipped config.

Real parts only: two demo agents (``python -m otel_toolcall_eval.cli demo`` with the demo's own config, the one the
compose stack runs) of one service in two versions (``OTEL_RESOURCE_ATTRIBUTES=service.version=...``, as a
deployment sets it) expose the processor's metrics through the SDK's Prometheus exporter; a real Prometheus scrapes
both every second. Each panel's queries are sent to it as Grafana would, its variables filled with what the
variables' own queries return (the newer version as Version, the older as Previous version), and a panel shows data
when one of its queries returns a series.

The demo runs as the compose stack runs it, with ``--judge`` (the real LLM judge, answered by the demo's scripted
local stand-in for a hosted model, ``demo.judge``): its conversations feed the session panels, its guard (shadow
mode) the guard panels, its contacts server that comes and goes the tool-list panel, and the stand-in's calibration
record the kappa panel. Every panel must show data; what needs the Collector or Tempo is on the traces dashboard
(``test_deploy_config``: that the main one needs neither).
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
RATE_INTERVAL = "15s"  # Grafana's $__rate_interval: at least four scrape intervals
RANGE = "1m"  # $__range: the run's length, about


def start_demo(processes: Processes, port: int, version: str) -> None:
    argv = [sys.executable, "-m", "otel_toolcall_eval.cli", "demo", "--prometheus-port", str(port)]
    argv += ["--traces-per-second", "10", "--duration", "180", "--failure-rate", "0.1", "--show", "0", "--judge"]
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
    assert not empty, "panels without data:\n" + "\n".join(f"{t}: {q}" for t, q in empty.items())
    # panels that would show data from one of their queries alone: the series that matters is there too
    for query in (
        "toolcall_eval_judge_agreement_kappa",  # not only the configured minimum
        'toolcall_eval_guard_decisions_total{decision="block"}',
        "toolcall_eval_session_turns_bucket",  # not only the dropped sessions
        # the judge's verdicts count by their judged trace's source: each version's, its agent named by the root
        *(f'toolcall_eval_judge_verdicts_total{{service_version="{v}", gen_ai_agent_name!=""}}' for v in VERSIONS),
    ):
        assert api.get("/api/v1/query", query=query)["result"], query
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
