"""One judge budget for a fleet: the Redis ledger (``judge.budget.ledger_redis_url_env``) against a real
``redis-server`` on 127.0.0.1 (``redis_server``), shared by processes and by two scoring-service replicas.

The replicas' judge calls go to the local fake of the model API (``judge_server``); nothing talks to anything
but 127.0.0.1.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from otel_toolcall_eval.config import ConfigError, EvalConfig
from otel_toolcall_eval.config.judge import Budget
from otel_toolcall_eval.judge.redis_ledger import RedisLedger, make_ledger
from otel_toolcall_eval.serve import Service
from tests.helpers import agent_traces, config_for, wait_until

from .judge_server import OPENAI_KEY, FakeJudgeServer, fake_judge_server
from .otlp_receiver import GrpcTraceReceiver
from .redis_server import RedisServer

pytestmark = pytest.mark.integration

NOW = 1_780_000_000.0  # a fixed instant: the ledger's period comes from the clock passed in, never the date


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    yield server
    server.stop()


def budget(amount: float, **extra: Any) -> Budget:
    return Budget.model_validate({"amount": amount, "ledger_redis_url_env": "FLEET_REDIS_URL", **extra})


def ledger_for(server: RedisServer, monkeypatch: pytest.MonkeyPatch, amount: float, now: float = NOW) -> RedisLedger:
    monkeypatch.setenv("FLEET_REDIS_URL", server.url)
    clock = [now]
    ledger = make_ledger(budget(amount), lambda: clock[0])
    assert isinstance(ledger, RedisLedger)
    return ledger


def test_reserve_settle_refuse_and_roll_over(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same rules as the in-process ledger (tests/judge/test_sampler.py), kept in Redis."""
    ledger = ledger_for(redis_server, monkeypatch, 1.0)
    first = ledger.reserve(0.6)
    assert first is not None and ledger.spent() == pytest.approx(0.6)
    assert ledger.reserve(0.5) is None  # 1.1 would pass the ceiling
    assert ledger.settle(first, 0.2) == 0.0  # cost less than reserved
    assert ledger.spent() == pytest.approx(0.2) and ledger.remaining() == pytest.approx(0.8)
    second = ledger.reserve(0.5)
    assert second is not None
    assert ledger.settle(second, 5.0) == pytest.approx(4.5)  # an over-report fills the period, no further
    assert ledger.spent() == pytest.approx(1.0) and ledger.reserve(0.01) is None
    # another process naming the same URL sees the same spend, and the key expires after its period
    other = ledger_for(redis_server, monkeypatch, 1.0)
    assert other.spent() == pytest.approx(1.0)
    client = redis.Redis.from_url(redis_server.url)
    assert 0 < client.ttl(ledger.key()) <= 31 * 86_400 + 86_400
    # next month: a fresh period
    later = ledger_for(redis_server, monkeypatch, 1.0, now=NOW + 40 * 86_400)
    assert later.spent() == 0.0 and later.reserve(0.9) is not None


def test_an_unreadable_value_fails_closed(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = ledger_for(redis_server, monkeypatch, 1.0)
    redis.Redis.from_url(redis_server.url).set(ledger.key(), "not a number")
    assert ledger.reserve(0.1) is None
    assert ledger.remaining() == 0.0


def test_losing_redis_means_no_judge_calls_never_unbounded_spend(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = ledger_for(redis_server, monkeypatch, 1.0)
    held = ledger.reserve(0.3)
    assert held is not None
    redis_server.stop()
    assert ledger.reserve(0.01) is None  # refused: no call is sent
    assert ledger.remaining() == 0.0  # the pacing sees a spent period and stops sampling
    ledger.settle(held, 0.1)  # cannot reach Redis: the reservation stays charged
    redis_server.start()  # same port, empty (no persistence): the ledger answers again
    assert ledger.reserve(0.01) is not None


_WORKER = textwrap.dedent(
    """
    import json, os, random, sys, time
    import redis
    from otel_toolcall_eval.config.judge import Budget
    from otel_toolcall_eval.judge.redis_ledger import make_ledger

    seed, amount = int(sys.argv[1]), float(sys.argv[2])
    ledger = make_ledger(Budget.model_validate({"amount": amount, "ledger_redis_url_env": "FLEET_REDIS_URL"}),
                         lambda: 1780000000.0)
    rng = random.Random(seed)
    start = redis.Redis.from_url(os.environ["FLEET_REDIS_URL"])
    start.incr("test:ready")
    deadline = time.monotonic() + 60
    while not start.exists("test:go") and time.monotonic() < deadline:  # all three start together
        time.sleep(0.005)
    spent = refused = 0
    granted = 0.0
    for _ in range(3000):  # bounded: stops once the budget is gone
        worst = rng.uniform(0.001, 0.02)
        reservation = ledger.reserve(worst)
        if reservation is None:
            refused += 1
            if refused >= 50:
                break
            continue
        actual = worst if rng.random() < 0.5 else worst * rng.uniform(0.2, 1.0)
        ledger.settle(reservation, actual)
        granted += actual
        spent += 1
    print(json.dumps({"granted": granted, "calls": spent}))
    """
)


def test_three_processes_sharing_one_budget_never_overspend(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three processes reserve and settle as fast as they can, interleaved: together they spend the budget
    and never more. A check-then-set outside one script would let two of them take the last room at once."""
    monkeypatch.setenv("FLEET_REDIS_URL", redis_server.url)
    amount = 2.0
    procs = [
        subprocess.Popen([sys.executable, "-c", _WORKER, str(seed), str(amount)], stdout=subprocess.PIPE, text=True)
        for seed in range(3)
    ]
    control = redis.Redis.from_url(redis_server.url)
    wait_until(lambda: int(control.get("test:ready") or 0) == 3, "three workers ready", timeout=60)
    control.set("test:go", 1)
    results = []
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        results.append(json.loads(out))
    total = sum(r["granted"] for r in results)
    assert all(r["calls"] > 0 for r in results)  # every process spent some
    assert total <= amount + 1e-9
    assert total > amount - 0.02  # and the budget was used up (the largest call is 0.02)
    ledger = ledger_for(redis_server, monkeypatch, amount)
    assert ledger.spent() == pytest.approx(total)


def test_config_errors_name_the_field(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"ledger_file .* or ledger_redis_url_env"):
        budget(1.0, ledger_file=str(tmp_path / "spend.json"))
    monkeypatch.delenv("FLEET_REDIS_URL", raising=False)
    with pytest.raises(ConfigError, match=r"judge\.budget\.ledger_redis_url_env: .*FLEET_REDIS_URL is not set"):
        make_ledger(budget(1.0))
    monkeypatch.setenv("FLEET_REDIS_URL", "ftp://nowhere")
    with pytest.raises(ConfigError, match=r"judge\.budget\.ledger_redis_url_env: FLEET_REDIS_URL is not a Redis URL"):
        make_ledger(budget(1.0))


# --- two scoring-service replicas, one budget ------------------------------------------------------


@pytest.fixture
def judge_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeJudgeServer]:
    monkeypatch.setenv("FLEET_JUDGE_KEY", OPENAI_KEY)
    with fake_judge_server() as fake:
        yield fake


def replica_config(receiver: GrpcTraceReceiver, judge: FakeJudgeServer, name: str, amount: float) -> EvalConfig:
    base = config_for(receiver)
    section = {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "base_url": judge.openai_url,
        "api_key_env": "FLEET_JUDGE_KEY",
        "headers": {"x-replica": name},
        "price": {"input_per_million": 1000, "output_per_million": 1000},  # a call costs about 1.0
        "budget": {"amount": amount, "ledger_redis_url_env": "FLEET_REDIS_URL"},
        "sampling": {"initial_rate": 1.0, "update_interval_seconds": 3600},
        "questions": ["argument_quality"],
        "retry_backoff_seconds": 0.01,
    }
    judge_config = type(base).model_validate({"judge": section}).judge
    return base.model_copy(update={"judge": judge_config})


def test_two_service_replicas_share_one_judge_budget(
    redis_server: RedisServer, judge_server: FakeJudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each replica samples every call (rate 1) and would alone spend the whole budget; together they stay
    under it, and both got to judge."""
    monkeypatch.setenv("FLEET_REDIS_URL", redis_server.url)
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    amount = 12.0
    receiver = GrpcTraceReceiver()
    replicas = [Service(replica_config(receiver, judge_server, name, amount)) for name in ("a", "b")]
    try:
        for svc in replicas:
            svc.start()
        sent = 0
        for i, svc in enumerate(replicas):
            exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{svc.grpc_port}", insecure=True)
            sent += len(agent_traces(exporter, svc.processor.config, traces=10, seed=30 + i))
        wait_until(lambda: len(receiver.spans()) >= sent, "every scored span at the next hop", timeout=60)
    finally:
        for svc in replicas:
            svc.stop(timeout=20)
        receiver.close()
    by_replica = {name: [r for r in judge_server.requests if r.headers.get("x-replica") == name] for name in "ab"}
    assert all(by_replica.values()), {k: len(v) for k, v in by_replica.items()}
    spent = sum((r.usage[0] + r.usage[1]) * 1000e-6 for r in judge_server.requests if r.usage is not None)
    assert spent <= amount
    judge = replicas[0].processor.judge
    assert judge is not None and judge.ledger.spent() == pytest.approx(spent)
    # it was the ledger that stopped them: the calls offered cost far more than the budget
    offered = sum(1 for s in receiver.spans() if s.span.name.startswith("execute_tool"))
    assert len(judge_server.requests) < offered
