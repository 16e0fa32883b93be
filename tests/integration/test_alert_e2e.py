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
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import promql_parser as pq
import pytest
import yaml

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus not installed (Debian package)"),
]

ROOT = Path(__file__).resolve().parents[2]
RULES_FILE = ROOT / "deploy" / "prometheus" / "rules" / "toolcall-eval.rules.yml"
ALERT = "ToolCallCompositeOkRateLow"
JOB = "toolcall-eval-demo"
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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Processes:
    """Processes this test started; all of them are killed at teardown, whatever happened."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.running: list[tuple[subprocess.Popen[bytes], Path]] = []

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = self.logs / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        self.running.append((proc, log))
        return proc

    def stop(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)

    def check_alive(self) -> None:
        for proc, log in self.running:
            if proc.poll() is not None and proc.returncode not in (0, -signal.SIGTERM):
                pytest.fail(f"{proc.args[0]} exited with {proc.returncode}:\n{log.read_text()[-3000:]}")

    def stop_all(self) -> None:
        for proc, _ in self.running:
            self.stop(proc)


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    procs = Processes(tmp_path)
    try:
        yield procs
    finally:
        procs.stop_all()


def wait_for(what: str, check: Callable[[], Any], processes: Processes, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        processes.check_alive()
        try:
            value = check()
        except httpx.HTTPError:
            value = None
        if value:
            return value
        time.sleep(0.25)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")


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


class PrometheusAPI:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def get(self, path: str, **params: str) -> Any:
        response = httpx.get(self.base + path, params=params, timeout=5)
        response.raise_for_status()
        body = response.json()
        assert body["status"] == "success", body
        return body["data"]

    def scalar(self, expr: str) -> float | None:
        result = self.get("/api/v1/query", query=expr)["result"]
        return float(result[0]["value"][1]) if result else None

    def rule(self, name: str) -> dict[str, Any]:
        for group in self.get("/api/v1/rules", type="alert")["groups"]:
            for rule in group["rules"]:
                if rule["name"] == name:
                    return dict(rule)
        raise AssertionError(f"Prometheus did not load alert {name}")

    def alerts(self, name: str) -> list[dict[str, Any]]:
        return [a for a in self.get("/api/v1/alerts")["alerts"] if a["labels"]["alertname"] == name]


def start_prometheus(processes: Processes, tmp_path: Path, demo_port: int) -> PrometheusAPI:
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump(scaled_rules(RULES_FILE.read_text()), sort_keys=False))
    return run_prometheus(processes, tmp_path, [f"127.0.0.1:{demo_port}"], [rules])


def run_prometheus(processes: Processes, tmp_path: Path, targets: list[str], rule_files: list[Path]) -> PrometheusAPI:
    """A real Prometheus scraping ``targets`` (job ``JOB``) every second, evaluating ``rule_files``."""
    config = tmp_path / "prometheus.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(r) for r in rule_files],
                "scrape_configs": [{"job_name": JOB, "static_configs": [{"targets": targets}]}],
            }
        )
    )
    port = free_port()
    data = tmp_path / "data"
    data.mkdir()
    argv = [
        str(shutil.which("prometheus")),
        f"--config.file={config}",
        f"--storage.tsdb.path={data}",
        f"--web.listen-address=127.0.0.1:{port}",
        f"--web.console.templates={tmp_path}",
        f"--web.console.libraries={tmp_path}",
    ]
    processes.start("prometheus", argv)
    api = PrometheusAPI(port)
    wait_for(
        "Prometheus to be ready", lambda: httpx.get(api.base + "/-/ready", timeout=2).status_code == 200, processes, 20
    )
    return api


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
