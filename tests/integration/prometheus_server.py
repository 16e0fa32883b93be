"""A real Prometheus for the end-to-end tests of the alert rules and the dashboard (Debian's ``prometheus``): the
processes a test starts (killed at teardown, whatever happened), Prometheus scraping given targets and evaluating
given rule files, and its HTTP API. Shared by test_alert_e2e.py and test_dashboard_e2e.py, which take the
``processes`` fixture by name (``processes = prometheus_server.processes``)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.helpers import free_port

NEEDS_PROMETHEUS = pytest.mark.skipif(
    shutil.which("prometheus") is None, reason="prometheus not installed (Debian package)"
)

JOB = "toolcall-eval-demo"


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
