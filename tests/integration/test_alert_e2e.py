"""End to end: the shipped composite alert goes from inactive to firing when the demo's failure rate rises.

Real parts only: the demo agent (``python -m otel_toolcall_eval.cli demo``) exposes the processor's metrics
on 127.0.0.1 through the SDK's Prometheus exporter, and a real Prometheus started here scrapes it every
second and evaluates the rules of ``deploy/prometheus/rules/toolcall-eval.rules.yml``.

So that this takes seconds instead of twenty minutes, the rules Prometheus loads are generated from the
shipped file by dividing every range selector, ``for:`` and group ``interval`` by 60 (minutes become
seconds); expressions, thresholds and volume guards are the shipped ones.
"""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import promql_parser as pq
import pytest
import yaml

from tests.helpers import free_port

from . import prometheus_server
from .prometheus_server import JOB, NEEDS_PROMETHEUS, Processes, PrometheusAPI, run_prometheus, wait_for

pytestmark = [pytest.mark.integration, NEEDS_PROMETHEUS]

processes = prometheus_server.processes  # the fixture: every process started is stopped at teardown

ROOT = Path(__file__).resolve().parents[2]
RULES_FILE = ROOT / "deploy" / "prometheus" / "rules" / "toolcall-eval.rules.yml"
ALERT = "ToolCallCompositeOkRateLow"
SPEEDUP = 60  # minutes in the shipped rules become seconds here
RANGE = re.compile(r"\[((?:\d+(?:ms|[smhdwy]))+)\]")  # compound too: 7d / 60 is [2h48m]


# --- rules derived from the shipped file ------------------------------------------------------------


def scale(duration: str) -> str:
    scaled = pq.parse_duration(duration) / SPEEDUP
    assert scaled >= timedelta(seconds=1) and scaled.total_seconds().is_integer(), f"{duration} does not scale"
    return str(pq.display_duration(scaled))


def scaled_rules(text: str) -> dict[str, Any]:
    """The shipped rules with every duration divided by SPEEDUP, and nothing else changed."""
    config = yaml.safe_load(text)
    for group in config["groups"]:
        if "interval" in group:
            group["interval"] = scale(group["interval"])
        for rule in group["rules"]:
            original = pq.parse(rule["expr"])
            rule["expr"] = RANGE.sub(lambda m: f"[{scale(m.group(1))}]", rule["expr"])
            assert windows(pq.parse(rule["expr"])) == {w / SPEEDUP for w in windows(original)}, rule["expr"]
            if "for" in rule:
                rule["for"] = scale(rule["for"])
    return dict(config)


def windows(expr: pq.Expr) -> set[timedelta]:
    found: set[timedelta] = set()
    pq.walk(expr, lambda node: found.add(node.range) if isinstance(node, pq.MatrixSelector) else None)
    return found


def test_scaled_rules_keep_expressions_and_thresholds() -> None:
    shipped = yaml.safe_load(RULES_FILE.read_text())
    scaled = scaled_rules(RULES_FILE.read_text())
    pairs = list(zip(shipped["groups"][0]["rules"], scaled["groups"][0]["rules"], strict=True))
    alert = next(new for old, new in pairs if old.get("alert") == ALERT)
    assert alert["for"] == "10s" and "[10s]" in alert["expr"] and "[10m]" not in alert["expr"]
    for old, new in pairs:
        assert RANGE.sub("[w]", old["expr"]) == RANGE.sub("[w]", new["expr"])  # only the windows changed
        assert {k: v for k, v in old.items() if k not in {"expr", "for"}} == {
            k: v for k, v in new.items() if k not in {"expr", "for"}
        }


# --- processes -----------------------------------------------------------------------------------------


def start_demo(processes: Processes, port: int, failure_rate: float) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "otel_toolcall_eval.cli", "demo", "--prometheus-port", str(port)]
    argv += ["--traces-per-second", "20", "--duration", "120", "--failure-rate", str(failure_rate), "--show", "0"]
    proc = processes.start(f"demo-{failure_rate}", argv)
    wait_for(
        f"the demo's metrics on port {port}",
        lambda: "toolcall_eval_traces_total{" in httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text,
        processes,
        timeout=20,
    )
    return proc


def start_prometheus(processes: Processes, tmp_path: Path, demo_port: int) -> PrometheusAPI:
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump(scaled_rules(RULES_FILE.read_text()), sort_keys=False))
    return run_prometheus(processes, tmp_path, [f"127.0.0.1:{demo_port}"], [rules])


# --- the test ----------------------------------------------------------------------------------------------


def test_composite_alert_fires_when_the_failure_rate_rises(tmp_path: Path, processes: Processes) -> None:
    demo_port = free_port()
    clean = start_demo(processes, demo_port, failure_rate=0.0)
    api = start_prometheus(processes, tmp_path, demo_port)
    volume = f'sum(increase(toolcall_eval_traces_total{{job="{JOB}"}}[10s]))'

    # Clean traffic: enough volume to pass the guard, no failing trace, and the alert stays inactive.
    wait_for("20 traces in the 10 s window", lambda: (api.scalar(volume) or 0) >= 20, processes, timeout=30)

    def evaluated_after(previous: str) -> dict[str, Any] | None:
        rule = api.rule(ALERT)
        return rule if rule["lastEvaluation"] != previous else None

    last_evaluation = ""
    for _ in range(3):  # three evaluations in a row, each one seen (waited for: a loaded Prometheus runs late)
        rule = wait_for("the rule's next evaluation", partial(evaluated_after, last_evaluation), processes, 30)
        assert rule["health"] == "ok", rule
        assert rule["state"] == "inactive", rule
        last_evaluation = rule["lastEvaluation"]
        assert api.alerts(ALERT) == []
    assert api.scalar(f'sum(increase(toolcall_eval_traces_total{{job="{JOB}", composite_ok="false"}}[10s]))') is None
    assert (api.scalar(volume) or 0) >= 20, (
        "volume is above the guard: the ok-rate, not low traffic, keeps the alert silent"
    )

    # The same service now fails often: the alert goes pending, then fires after its (scaled) `for:`.
    processes.stop(clean)
    start_demo(processes, demo_port, failure_rate=0.2)
    seen: list[str] = []

    def firing() -> dict[str, Any] | None:
        for alert in api.alerts(ALERT):
            if not seen or seen[-1] != alert["state"]:
                seen.append(alert["state"])
            if alert["state"] == "firing":
                return alert
        return None

    alert = wait_for(f"{ALERT} to fire", firing, processes, timeout=60)
    assert seen[0] == "pending" and seen[-1] == "firing", seen
    assert alert["labels"]["job"] == JOB and alert["labels"]["severity"] == "warning"
    assert float(alert["value"]) > 0.10
    assert alert["annotations"]["traceql"] == "{ span.toolcall_eval.trace.composite_ok = false }"
