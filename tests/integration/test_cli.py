"""The ``streamkit`` command line end to end, as subprocesses against a broker process:
topics, produce from stdin, consume, consumer groups, and its error contract (one line on
stderr, exit code 2)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import ConfigResource

from streamkit.testing import BrokerProcess
from tests.integration.util import QUIET, admin, free_port, read_partition, wait_until

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("STREAMKIT_BOOTSTRAP_SERVER", "COLUMNS")}
    return subprocess.run([sys.executable, "-m", "streamkit", *args], input=stdin, capture_output=True,
                          text=True, timeout=timeout, cwd=REPO, env=env)


def ok(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    result = cli(*args, stdin=stdin)
    assert result.returncode == 0, f"streamkit {' '.join(args)} -> {result.returncode}: {result.stderr}"
    return result


def fails(*args: str, stdin: str | None = None) -> str:
    """Run a command that must fail: exit code 2, nothing on stdout; returns stderr."""
    result = cli(*args, stdin=stdin)
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == ""
    assert result.stderr.startswith("error: "), result.stderr
    return result.stderr


def short_name() -> str:
    # short: rich wraps table cells and lines at 80 columns when stdout is not a terminal
    return f"cli-{uuid.uuid4().hex[:6]}"


def topic_configs(bootstrap: str, topic: str) -> dict[str, str]:
    client = admin(bootstrap)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = client.describe_configs([resource], request_timeout=10)[resource].result(15)
    return {name: entry.value for name, entry in entries.items()}


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **QUIET})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        consumer.close()


def test_topics_lifecycle(broker: BrokerProcess) -> None:
    b = ("-b", broker.bootstrap)
    name = short_name()
    assert ok("topics", "create", name, "--partitions", "3", "--config", "retention.ms=3600000", *b).stdout == (
        f"created topic {name}\n")
    assert "already exists" in fails("topics", "create", name, *b)
    ok("topics", "create", name, "--if-not-exists", *b)

    listed = ok("topics", "list", *b).stdout.split()
    assert name in listed and "__consumer_offsets" not in listed
    assert "__consumer_offsets" in ok("topics", "list", "--internal", *b).stdout.split()

    described = ok("topics", "describe", name, *b).stdout.splitlines()
    assert described[0] == f"topic {name}: 3 partitions"
    # the topic's own setting is marked, the broker's default is not
    assert "  retention.ms=3600000  (override)" in described and "  cleanup.policy=delete" in described

    ok("topics", "alter-config", name, "--set", "retention.ms=7200000", "--set", "cleanup.policy=compact", *b)
    configs = topic_configs(broker.bootstrap, name)  # checked with another client
    assert (configs["retention.ms"], configs["cleanup.policy"]) == ("7200000", "compact")
    ok("topics", "alter-config", name, "--delete", "cleanup.policy", *b)
    described = ok("topics", "describe", name, *b).stdout.splitlines()
    assert "  cleanup.policy=delete" in described and "  retention.ms=7200000  (override)" in described  # the rest kept
    assert "invalid" in fails("topics", "alter-config", name, "--set", "retention.ms=soon", *b).lower()
    assert "nothing to change" in fails("topics", "alter-config", name, *b)

    assert ok("topics", "delete", name, *b).stdout == f"deleted topic {name}\n"
    assert name not in ok("topics", "list", *b).stdout.split()
    assert "UnknownTopicOrPartitionError" in fails("topics", "delete", name, *b)


def test_describe_missing_topic_does_not_create_it(broker: BrokerProcess) -> None:
    name = short_name()
    try:
        assert "does not exist" in fails("topics", "describe", name, "-b", broker.bootstrap)
    finally:
        assert name not in ok("topics", "list", "-b", broker.bootstrap).stdout.split()


def test_produce_from_stdin_and_consume(broker: BrokerProcess) -> None:
    b = ("-b", broker.bootstrap)
    name = short_name()
    ok("topics", "create", name, "--partitions", "2", *b)
    lines = [f"user-{i % 5}:click:{i}" for i in range(20)]  # the value keeps its own ':'
    produced = ok("produce", name, "--key-separator", ":", *b, stdin="\n".join(lines) + "\n")
    assert produced.stderr.strip() == f"produced 20 records to {name}"

    stored = [r for p in range(2) for r in read_partition(broker.bootstrap, name, p)]
    assert sorted((r.key, r.value) for r in stored) == sorted(
        (line.split(":", 1)[0].encode(), line.split(":", 1)[1].encode()) for line in lines)
    # one key, one partition
    assert all(len({r.partition for r in stored if r.key == k}) == 1 for k in {r.key for r in stored})

    out = ok("consume", name, "--from-beginning", "--max-messages", "20", "--print-key", *b).stdout
    assert sorted(out.splitlines()) == sorted(line.replace(":", "\t", 1) for line in lines)
    few = ok("consume", name, "--from-beginning", "--max-messages", "3", *b).stdout.splitlines()
    assert len(few) == 3 and all(v.startswith("click:") for v in few)

    # plain lines without a key separator, to a given partition
    ok("produce", name, "--partition", "1", "--acks", "1", "--compression", "gzip", *b, stdin="plain\nlines\n")
    assert [r.value for r in read_partition(broker.bootstrap, name, 1)][-2:] == [b"plain", b"lines"]

    assert "no key separator" in fails("produce", name, "--key-separator", ":", *b, stdin="a:1\nnokey\n")
    assert "--offset needs --partition" in fails("consume", name, "--offset", "3", *b)
    assert "no partition 7" in fails("consume", name, "--partition", "7", "--timeout-ms", "500", *b)


def test_consume_one_partition_from_an_offset(broker: BrokerProcess) -> None:
    b = ("-b", broker.bootstrap)
    name = short_name()
    ok("topics", "create", name, "--partitions", "2", *b)
    ok("produce", name, "--partition", "0", *b, stdin="".join(f"v{i}\n" for i in range(10)))
    out = ok("consume", name, "--partition", "0", "--offset", "4", "--timeout-ms", "1500", *b).stdout
    assert out.splitlines() == [f"v{i}" for i in range(4, 10)]


def table_rows(output: str) -> list[list[str]]:
    """The body rows of the rich tables in ``output`` (cells stripped), header excluded."""
    rows = []
    for line in output.splitlines():
        if line.startswith("│"):
            rows.append([c.strip() for c in line.strip("│").split("│")])
    return rows


def _describe_rows(output: str) -> dict[int, tuple[int, int, int]]:
    """partition -> (committed, end offset, lag) from ``groups describe``'s table."""
    rows = {}
    for line in output.splitlines():
        cells = [c.strip() for c in re.split(r"[│|]", line) if c.strip()]
        if len(cells) == 5 and cells[1].isdigit():
            rows[int(cells[1])] = (int(cells[2]), int(cells[3]), int(cells[4]))
    return rows


def test_groups_list_describe_and_reset(broker: BrokerProcess) -> None:
    b = ("-b", broker.bootstrap)
    name, group = short_name(), short_name()
    ok("topics", "create", name, "--partitions", "3", *b)
    ok("produce", name, "--key-separator", ":", *b, stdin="".join(f"k{i}:v{i}\n" for i in range(30)))
    ends = {p: len(read_partition(broker.bootstrap, name, p)) for p in range(3)}

    out = ok("consume", name, "--group", group, "--from-beginning", "--max-messages", "30", *b).stdout
    assert sorted(out.splitlines()) == sorted(f"v{i}" for i in range(30))
    assert committed(broker.bootstrap, group, name, 3) == ends  # committed on exit

    listed = ok("groups", "list", *b).stdout
    assert [c.strip() for c in re.split(r"[┃]", listed.splitlines()[1]) if c.strip()] == [
        "group", "protocol type", "group type"]
    assert [group, "consumer", "classic"] in table_rows(listed)

    described = ok("groups", "describe", group, *b).stdout
    assert described.splitlines()[0] == f"group {group}: Empty, 0 members"
    assert described.splitlines()[1] == "protocol: classic"
    assert _describe_rows(described) == {p: (ends[p], ends[p], 0) for p in range(3)}

    # dry run: prints the targets, commits nothing
    dry = cli("groups", "reset-offsets", group, "--topic", name, "--to-earliest", *b)
    assert dry.returncode == 0 and "dry run" in dry.stderr
    # topic, partition, current offset, new offset, earliest, latest
    assert table_rows(dry.stdout) == [[name, str(p), str(ends[p]), "0", "0", str(ends[p])] for p in range(3)]
    assert committed(broker.bootstrap, group, name, 3) == ends
    ok("groups", "reset-offsets", group, "--topic", name, "--to-earliest", "--execute", *b)
    assert committed(broker.bootstrap, group, name, 3) == dict.fromkeys(range(3), 0)
    assert _describe_rows(ok("groups", "describe", group, *b).stdout) == {
        p: (0, ends[p], ends[p]) for p in range(3)}
    ok("groups", "reset-offsets", group, "--topic", name, "--to-offset", "2", "--execute", *b)
    assert committed(broker.bootstrap, group, name, 3) == dict.fromkeys(range(3), 2)
    again = ok("consume", name, "--group", group, "--max-messages", "24", *b).stdout.splitlines()
    assert len(again) == 24  # everything after offset 2 of each partition
    assert "exactly one of" in fails("groups", "reset-offsets", group, "--topic", name, *b)

    # an active member: the broker refuses commits from outside the group
    member = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "session.timeout.ms": 6000,
                       "heartbeat.interval.ms": 250, **QUIET})
    member.subscribe([name])
    try:
        wait_until(lambda: member.poll(0.1) is None and bool(member.assignment()), 30, "the member's assignment")
        assert "still active" in fails("groups", "reset-offsets", group, "--topic", name, "--to-earliest",
                                       "--execute", *b)
        described = ok("groups", "describe", group, *b).stdout
        assert described.splitlines()[0] == f"group {group}: Stable, 1 members"
    finally:
        member.close()


UNREACHABLE_COMMANDS = [
    ("topics", "list"), ("topics", "create", "t"), ("topics", "describe", "t"), ("topics", "delete", "t"),
    ("topics", "alter-config", "t", "--set", "retention.ms=1"), ("produce", "t"),
    ("consume", "t", "--max-messages", "1"), ("groups", "list"), ("groups", "describe", "g"),
    ("groups", "reset-offsets", "g", "--topic", "t", "--to-earliest"),
]


@pytest.mark.parametrize("command", UNREACHABLE_COMMANDS, ids=lambda c: "-".join(c[:2]))
def test_unreachable_broker_is_one_line_with_the_reason(command: tuple[str, ...]) -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    stderr = fails(*command, "-b", bootstrap, stdin="a\n")
    assert stderr == f"error: cannot reach a broker at {bootstrap} (connection refused)\n"


@pytest.mark.parametrize("mode", ["standalone", "distributed"])
def test_unreachable_broker_of_a_connect_worker(tmp_path: Path, mode: str) -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    worker = {"bootstrap.servers": bootstrap, "listeners": "http://127.0.0.1:0",
              "offset.storage.file.filename": str(tmp_path / "offsets.json")}
    if mode == "distributed":
        worker = {**json.loads((REPO / "connectors" / "worker-distributed.json").read_text()),
                  "bootstrap.servers": bootstrap, "listeners": "http://127.0.0.1:0"}
    (tmp_path / "worker.json").write_text(json.dumps(worker))
    connectors = [str(REPO / "connectors" / "file-source.json")] if mode == "standalone" else []
    stderr = fails("connect", mode, str(tmp_path / "worker.json"), *connectors)
    assert stderr == f"error: cannot reach a broker at {bootstrap} (connection refused)\n"


# -- the broker command: a Kafka server.properties, signals, clean-shutdown markers -----------


def _start_broker_command(args: list[str], log_file: Path, ready: Path) -> subprocess.Popen[bytes]:
    """``streamkit broker ARGS --ready-file READY`` with its output in ``log_file``; waits
    until it listens."""
    with open(log_file, "ab") as out:
        process = subprocess.Popen([sys.executable, "-m", "streamkit", "broker", *args, "--ready-file", str(ready)],
                                   stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        wait_until(lambda: process.poll() is not None or (ready.exists() and ready.read_text().strip()), 30,
                   lambda: f"the broker to listen ({log_file.read_text()})")
    except AssertionError:
        process.kill()
        process.wait(10)
        raise
    assert process.poll() is None, f"the broker exited with {process.returncode}: {log_file.read_text()}"
    return process


def _stop(process: subprocess.Popen[bytes], sig: signal.Signals = signal.SIGTERM) -> int:
    if process.poll() is None:
        process.send_signal(sig)
    return process.wait(30)


# Apache Kafka's own config/server.properties, verbatim (tests/broker/): what each leaves with
# no effect on a single broker, in the file's order.
KAFKA_FILES = {
    "kafka-4.0.0": ["process.roles=broker,controller", "controller.quorum.bootstrap.servers=localhost:9093",
                    "inter.broker.listener.name=PLAINTEXT", "controller.listener.names=CONTROLLER",
                    "num.network.threads=3", "num.io.threads=8", "socket.send.buffer.bytes=102400",
                    "socket.receive.buffer.bytes=102400", "num.recovery.threads.per.data.dir=1",
                    "offsets.topic.replication.factor=1", "share.coordinator.state.topic.replication.factor=1",
                    "share.coordinator.state.topic.min.isr=1", "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1", "offsets.topic.min.isr=1"],
    "kafka-3.9.1": ["num.network.threads=3", "num.io.threads=8", "socket.send.buffer.bytes=102400",
                    "socket.receive.buffer.bytes=102400", "num.recovery.threads.per.data.dir=1",
                    "offsets.topic.replication.factor=1", "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1", "zookeeper.connect=",
                    "zookeeper.connection.timeout.ms=18000", "offsets.topic.min.isr=1"],
}


@pytest.mark.parametrize("kafka", sorted(KAFKA_FILES))
def test_broker_runs_from_a_kafka_server_properties(tmp_path: Path, kafka: str) -> None:
    """A Kafka installation's server.properties starts the broker as it is. The command line
    moves it to a free port and a private directory (it wins over listeners and log.dirs),
    and empties the 3.9 file's zookeeper.connect so this broker runs alone. Every Kafka
    setting is accepted, offsets.topic.min.isr too; the ones with no effect on a single
    broker are named, with their values, in one line."""
    properties = REPO / "tests" / "broker" / f"{kafka}-server.properties"
    data_dir = tmp_path / "kafka-logs"
    log_file, ready = tmp_path / "broker.log", tmp_path / "ready"
    overrides = ["--set", "num.partitions=3", "--set", "offsets.topic.num.partitions=2",
                 "--set", "offsets.topic.min.isr=1"]
    if kafka == "kafka-4.0.0":  # it advertises localhost:9092: the bound port instead
        overrides += ["--set", "advertised.listeners=PLAINTEXT://127.0.0.1:0"]
    else:
        overrides += ["--set", "zookeeper.connect="]
    process = _start_broker_command(["--config", str(properties), "--host", "127.0.0.1", "--port", "0",
                                     "--data-dir", str(data_dir), *overrides], log_file, ready)
    try:
        bootstrap = f"127.0.0.1:{int(ready.read_text())}"
        topic = short_name()
        ok("produce", topic, "-b", bootstrap, stdin="a\nb\n")  # auto-created with num.partitions
        metadata = admin(bootstrap).list_topics(topic, timeout=10)
        assert len(metadata.topics[topic].partitions) == 3
        assert [f"{b.host}:{b.port}" for b in metadata.brokers.values()] == [bootstrap]
        assert {p.name for p in data_dir.iterdir()} >= {f"{topic}-{p}" for p in range(3)} | {
            "__consumer_offsets-0", "__consumer_offsets-1"}
    finally:
        assert _stop(process) == 0, log_file.read_text()
    text = log_file.read_text()
    lines = [line for line in text.splitlines() if "settings with no effect here" in line]
    assert len(lines) == 1, text
    assert lines[0].endswith("settings with no effect here: " + ", ".join(KAFKA_FILES[kafka])), lines[0]
    assert "Traceback" not in text


@pytest.mark.parametrize("where", ["file", "set"])
def test_broker_config_typo_fails_with_one_line(tmp_path: Path, where: str) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text("broker.id=0\nnum.network.threads=3\noffsets.topic.min.isr=1\nnum.partitons=3\n")
    args = ["--config", str(properties)] if where == "file" else ["--set", "num.partitons=3"]
    stderr = fails("broker", "--data-dir", str(tmp_path / "data"), "--port", "0", *args)
    assert stderr == "error: unknown broker config 'num.partitons' (did you mean 'num.partitions'?)\n"
    assert not (tmp_path / "data").exists()


def test_broker_id_and_node_id_must_agree_in_one_line(tmp_path: Path) -> None:
    stderr = fails("broker", "--data-dir", str(tmp_path / "data"), "--port", "0",
                   "--set", "broker.id=1", "--set", "node.id=2")
    assert stderr == ("error: broker.id=1 and node.id=2 disagree: they are the same setting (broker.id in "
                      "ZooKeeper mode, node.id in KRaft); set one, or both to the same id\n")


def test_broker_refuses_a_tls_listener_without_a_key_in_one_line(tmp_path: Path) -> None:
    stderr = fails("broker", "--data-dir", str(tmp_path / "data"), "--set", "listeners=SSL://:9093")
    assert stderr.startswith("error: listener SSL uses TLS but has no key: set ssl.keystore.location")
    assert stderr.count("\n") == 1


def test_broker_names_an_unreadable_keystore_in_one_line(tmp_path: Path) -> None:
    stderr = fails("broker", "--data-dir", str(tmp_path / "data"), "--set", "listeners=SSL://127.0.0.1:0",
                   "--set", f"ssl.keystore.location={tmp_path / 'missing.pem'}")
    assert stderr.startswith(f"error: listener SSL: cannot load the keystore ({tmp_path / 'missing.pem'})")
    assert stderr.count("\n") == 1
    assert not (tmp_path / "data").exists()


def _partition_dirs(data_dir: Path) -> list[Path]:
    return sorted(d for d in data_dir.iterdir() if d.is_dir() and re.fullmatch(r".+-\d+", d.name))


def _restart_log(broker: BrokerProcess) -> str:
    """Start the broker again; the log lines of this start only."""
    before = broker.log_file.stat().st_size
    broker.start()
    with open(broker.log_file, "rb") as f:
        f.seek(before)
        return f.read().decode(errors="replace")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_signal_leaves_clean_shutdown_markers_and_restart_skips_recovery(tmp_path: Path, sig: signal.Signals) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        topic = short_name()
        ok("topics", "create", topic, "--partitions", "3", "-b", broker.bootstrap)
        ok("produce", topic, "--key-separator", ":", "-b", broker.bootstrap,
           stdin="".join(f"k{i}:v{i}\n" for i in range(30)))
        ok("consume", topic, "--group", short_name(), "--from-beginning", "--max-messages", "30",
           "-b", broker.bootstrap)  # writes __consumer_offsets too
        assert broker.process is not None
        broker.process.send_signal(sig)
        assert broker.process.wait(30) == 0, broker.log_file.read_text()
        assert "streamkit broker stopped" in broker.log_file.read_text()
        dirs = _partition_dirs(broker.data_dir)
        assert {d.name for d in dirs} >= {f"{topic}-{p}" for p in range(3)}
        assert [d.name for d in dirs if not (d / ".clean-shutdown").exists()] == []

        started = _restart_log(broker)
        assert "clean shutdown: no partition needs recovery" in started, started
        assert "recover" not in started.replace("no partition needs recovery", ""), started
        # the markers are consumed by the open (a later crash must not look clean)
        assert [d.name for d in dirs if (d / ".clean-shutdown").exists()] == []
        out = ok("consume", topic, "--from-beginning", "--max-messages", "30", "-b", broker.bootstrap).stdout
        assert sorted(out.split()) == sorted(f"v{i}" for i in range(30))
    finally:
        broker.stop()


def test_sigkill_leaves_no_marker_and_restart_recovers(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        topic = short_name()
        ok("topics", "create", topic, "--partitions", "2", "-b", broker.bootstrap)
        ok("produce", topic, "--acks", "all", "-b", broker.bootstrap, stdin="".join(f"v{i}\n" for i in range(20)))
        broker.kill()
        dirs = _partition_dirs(broker.data_dir)
        assert [d.name for d in dirs if (d / ".clean-shutdown").exists()] == []
        started = _restart_log(broker)
        match = re.search(r"unclean shutdown: recovering (\d+) partitions", started)
        assert match is not None, started
        assert int(match[1]) == len([d for d in dirs if any(d.glob("*.log"))])
        out = ok("consume", topic, "--from-beginning", "--max-messages", "20", "-b", broker.bootstrap).stdout
        assert sorted(out.split()) == sorted(f"v{i}" for i in range(20))
    finally:
        broker.stop()
