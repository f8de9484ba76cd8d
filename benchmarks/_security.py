"""Produce and consume over SASL_SSL beside PLAINTEXT, on one streamkit broker listening on
both (``broker_bench.py --security``).

The broker's SASL_SSL listener uses a certificate from ``streamkit.testing_tls`` (EC P-256)
and SCRAM-SHA-512; the client is broker_bench's librdkafka producer and consumer, with
``security.protocol=SASL_SSL`` added. ``trials`` rounds, the two listeners interleaved in
each (alternating which goes first), each on a fresh single-partition topic. The ratios
SASL_SSL/PLAINTEXT are the median of the rounds' paired ratios; target >= 0.7 (issue 19).
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from streamkit.testing import BrokerProcess
from streamkit.testing_tls import CertificateAuthority

__all__ = ["SecurityResult", "report_security", "run_security"]

RATIO_TARGET = 0.7
_USER, _PASSWORD = "bench", "bench-secret"


@dataclass
class SecurityResult:
    """Per kind (produce, consume) and listener: each round's (records/s, broker CPU-s per
    million records)."""

    produce: dict[str, list[tuple[float, float]]] = field(default_factory=lambda: {"PLAINTEXT": [], "SASL_SSL": []})
    consume: dict[str, list[tuple[float, float]]] = field(default_factory=lambda: {"PLAINTEXT": [], "SASL_SSL": []})


def _broker(base: Path) -> tuple[BrokerProcess, dict[str, Any]]:
    ca = CertificateAuthority(base / "ca")
    cert = ca.issue("broker", "CN=localhost", hosts=["127.0.0.1", "localhost"])
    broker = BrokerProcess(base / "data", settings={
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(cert.keystore),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "offsets.topic.num.partitions": "1",
    }).start()
    admin = AdminClient({"bootstrap.servers": broker.address("PLAINTEXT"), "log_level": 0})
    upsert = UserScramCredentialUpsertion(_USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                          _PASSWORD.encode())
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    client = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(ca.cert_path),
              "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": _USER, "sasl.password": _PASSWORD}
    return broker, client


def run_security(records: int, trials: int, produce: Callable[..., Any], consume: Callable[..., Any],
                 create_topic: Callable[..., Any], work: Path | None = None) -> SecurityResult:
    """``produce(target, topic, records, extra=...)`` / ``consume(target, topic, records,
    extra=...)`` are broker_bench's loops; ``create_topic(target, topic)`` its helper."""
    from broker_bench import Target  # benchmarks/ is on sys.path (broker_bench puts it there)

    base = Path(tempfile.mkdtemp(prefix="security-", dir=work))
    broker, secure = _broker(base)
    result = SecurityResult()
    try:
        pid = broker.process.pid if broker.process else 0
        targets = {name: Target(name, broker.address(name), pid, broker.stop) for name in ("PLAINTEXT", "SASL_SSL")}
        extras: dict[str, dict[str, Any]] = {"PLAINTEXT": {}, "SASL_SSL": secure}
        for trial in range(trials):
            order = ["PLAINTEXT", "SASL_SSL"] if trial % 2 == 0 else ["SASL_SSL", "PLAINTEXT"]
            line = []
            for name in order:
                topic = f"bench-security-{name.lower()}-{trial}"
                create_topic(targets["PLAINTEXT"], topic)
                p = produce(targets[name], topic, records, extra=extras[name])
                c = consume(targets[name], topic, records, extra=extras[name])
                result.produce[name].append((p.rate, p.broker_cpu_per_m))
                result.consume[name].append((c.rate, c.broker_cpu_per_m))
                line.append(f"{name} produce {p.rate:>9,.0f} consume {c.rate:>9,.0f} rec/s")
            print(f"  round {trial + 1}/{trials}: " + "  ".join(line), flush=True)
    finally:
        broker.stop()
    return result


def report_security(records: int, result: SecurityResult) -> None:
    print(f"\nsecurity: SASL_SSL (TLS + SCRAM-SHA-512) vs PLAINTEXT, one broker, {records:,} x 100-byte "
          "records per round")
    for kind, runs in (("produce", result.produce), ("consume", result.consume)):
        rates = {name: [rate for rate, _ in r] for name, r in runs.items()}
        cpu = {name: statistics.median(c for _, c in r) for name, r in runs.items()}
        ratios = [a / b for a, b in zip(rates["SASL_SSL"], rates["PLAINTEXT"], strict=False) if b]
        mid = statistics.median(ratios) if ratios else float("nan")
        ok = "ok" if mid >= RATIO_TARGET else "MISS"
        shown = ", ".join(f"{name} {max(r):,.0f} best ({statistics.median(r):,.0f} median, broker "
                          f"{cpu[name]:.2f} CPU-s/M)" for name, r in rates.items())
        print(f"  {kind}: {shown} records/s; ratio {mid:.2f}x ({min(ratios):.2f}-{max(ratios):.2f}), "
              f"target >= {RATIO_TARGET}x {ok}")
