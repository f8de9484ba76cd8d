"""What authorization and client quotas cost: streamkit's broker with the ACL authorizer and
client quotas on, against the same broker without them, measured in the same run.

Two ``streamkit broker`` processes on loopback. The guarded one runs Kafka's
StandardAuthorizer settings (``allow.everyone.if.no.acl.found=false``, no super user) with
``--acls`` bindings (default 1,000: literal and prefixed topics and groups of other
principals, as a shared cluster has) plus the few that let ``User:ANONYMOUS`` create, write
and read the ``bench-`` topics (and its consumer's group), and a default client-id quota far above what the run uses
(so every request is measured against it, and none is throttled). ``--trials`` rounds, the
brokers interleaved in each, each round on a fresh single-partition topic: produce
``--records`` 100-byte records, then consume them, as ``broker_bench.py`` does (same
clients and settings). Shown: the best and median records/s, the brokers' CPU per million
records, and the ratio guarded/plain as the median of the rounds' paired ratios (target
>= 0.9 for both).

Usage: python benchmarks/acl_bench.py [--records N] [--trials T] [--acls N]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from broker_bench import Run, Target, consume_run, create_topic, paired, produce_run
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from streamkit.testing import BrokerProcess

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TARGET = 0.9


def _start(data_dir: Path, name: str, settings: dict[str, str]) -> tuple[Target, BrokerProcess]:
    broker = BrokerProcess(data_dir, settings=settings).start()
    assert broker.process is not None
    return Target(name, broker.bootstrap, broker.process.pid, broker.stop), broker


def _bindings(count: int) -> list[AclBinding]:
    lit, pre = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
    allow = AclPermissionType.ALLOW
    out = [AclBinding(ResourceType.TOPIC, "bench-", pre, "User:ANONYMOUS", "*", op, allow)
           for op in (AclOperation.CREATE, AclOperation.WRITE, AclOperation.READ)]
    out.append(AclBinding(ResourceType.BROKER, "kafka-cluster", lit, "User:ANONYMOUS", "*",
                          AclOperation.ALL, allow))
    out.append(AclBinding(ResourceType.GROUP, "broker-bench", lit, "User:ANONYMOUS", "*",  # the consumer's
                          AclOperation.READ, allow))
    for i in range(count):
        rtype = ResourceType.TOPIC if i % 3 else ResourceType.GROUP
        pattern = pre if i % 4 == 0 else lit
        out.append(AclBinding(rtype, f"team-{i}", pattern, f"User:user-{i % 50}", "*", AclOperation.READ, allow))
    return out


def _guard(target: Target, acls: int) -> None:
    client = AdminClient({"bootstrap.servers": target.bootstrap})
    bindings = _bindings(acls)
    for start in range(0, len(bindings), 500):
        for future in client.create_acls(bindings[start:start + 500], request_timeout=30).values():
            future.result(60)


def _quota(target: Target) -> None:
    """A default client-id quota no client here reaches, through AlterClientQuotas."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.admin import KafkaAdminClient
        from kafka.protocol.admin import AlterClientQuotasRequest as Alter

    client = KafkaAdminClient(bootstrap_servers=target.bootstrap)
    try:
        entry = Alter.EntryData(entity=[Alter.EntryData.EntityData(entity_type="client-id", entity_name=None)],
                                ops=[Alter.EntryData.OpData(key=k, value=1e12, remove=False)
                                     for k in ("producer_byte_rate", "consumer_byte_rate")])
        response = client._manager.run(client._manager.send, Alter(entries=[entry], validate_only=False))
        assert response.entries[0].error_code == 0, response
    finally:
        client.close()


def _line(label: str, runs: list[Run]) -> str:
    rates = [r.rate for r in runs]
    cpu = statistics.median(r.broker_cpu_per_m for r in runs)
    return (f"  {label:<26} {max(rates):>12,.0f} rec/s best  {statistics.median(rates):>12,.0f} median  "
            f"broker CPU {cpu:6.2f} s/M")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=300_000, help="100-byte records per round (default 300,000)")
    parser.add_argument("--trials", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--acls", type=int, default=1_000, help="other principals' ACLs (default 1,000)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="acl-bench-"))
    started = time.perf_counter()
    plain, plain_proc = _start(work / "plain", "plain", {})
    # ANONYMOUS sets the ACLs up as a super user, then the broker restarts without one.
    guarded, guarded_proc = _start(work / "guarded", "guarded",
                                   {"authorizer.class.name": STANDARD, "super.users": "User:ANONYMOUS"})
    try:
        _guard(guarded, args.acls)
        _quota(guarded)
        guarded_proc.stop()
        del guarded_proc.settings["super.users"]
        guarded_proc.start()
        assert guarded_proc.process is not None
        guarded = Target("guarded", guarded_proc.bootstrap, guarded_proc.process.pid, guarded_proc.stop)
        runs: dict[str, dict[str, list[Run]]] = {"plain": {"produce": [], "consume": []},
                                                 "guarded": {"produce": [], "consume": []}}
        for trial in range(args.trials):
            for target in (plain, guarded) if trial % 2 == 0 else (guarded, plain):
                topic = f"bench-{trial}"
                create_topic(target, topic)
                runs[target.name]["produce"].append(produce_run(target, topic, args.records))
                runs[target.name]["consume"].append(consume_run(target, topic, args.records))
        print(f"acl_bench: {args.records:,} x 100-byte records per round, {args.trials} interleaved rounds, "
              f"{args.acls:,} other ACLs + a default client-id quota on the guarded broker")
        ok = True
        for kind in ("produce", "consume"):
            print(_line(f"{kind} plain", runs["plain"][kind]))
            print(_line(f"{kind} ACLs + quotas", runs["guarded"][kind]))
            mid, text = paired(runs["guarded"][kind], runs["plain"][kind])
            ok = ok and mid >= TARGET
            print(f"  {kind} guarded/plain: {text} (target >= {TARGET}: {'met' if mid >= TARGET else 'NOT met'})")
        print(f"(total {time.perf_counter() - started:.0f} s)")
        return 0 if ok else 1
    finally:
        plain_proc.stop()
        guarded_proc.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
