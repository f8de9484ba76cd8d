"""Everyday use of the ``streamkit`` command (issue 9), as subprocesses against real broker
and worker processes: data directories locked against a second process, errors that come at
once in one line with the right exit code, offsets reset by partition and time with a dry
run, worker settings from the command line, and a CLI that explains itself."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from streamkit.testing import BrokerProcess
from tests.integration.test_cli import REPO, cli, committed, fails, ok, short_name, table_rows
from tests.integration.util import admin, free_port, read_partition, wait_until

pytestmark = pytest.mark.integration

APP = "tests.streams.apps_for_tests.counter:app"


def one_line(stderr: str) -> str:
    assert stderr.count("\n") == 1 and stderr.endswith("\n"), stderr
    assert "Traceback" not in stderr
    return stderr


def topics(bootstrap: str) -> set[str]:
    return set(admin(bootstrap).list_topics(timeout=10).topics)


# -- data safety: one process per data directory --------------------------------------------


def test_second_broker_on_a_data_dir_is_refused(broker: BrokerProcess) -> None:
    assert broker.process is not None
    lock = broker.data_dir / ".lock"
    assert lock.read_text().strip() == str(broker.process.pid)
    before = broker.log_file.stat().st_size
    stderr = one_line(fails("broker", "--data-dir", str(broker.data_dir), "--port", "0"))
    assert str(broker.data_dir) in stderr and f"process {broker.process.pid}" in stderr, stderr
    assert "recover" not in stderr
    # the running broker is untouched and still serves
    name = short_name()
    ok("produce", name, "-b", broker.bootstrap, stdin="still\n")
    assert [r.value for r in read_partition(broker.bootstrap, name, 0)] == [b"still"]
    assert broker.log_file.stat().st_size >= before


def test_lock_is_released_by_a_killed_broker(tmp_path: Path) -> None:
    """flock dies with its process: a SIGKILLed broker's .lock (with its stale pid) does not
    keep the next broker out."""
    first = BrokerProcess(tmp_path / "data").start()
    first.kill()
    second = BrokerProcess(tmp_path / "data").start()
    try:
        assert second.process is not None
        assert (tmp_path / "data" / ".lock").read_text().strip() == str(second.process.pid)
    finally:
        assert second.stop() == 0


def test_broker_data_dir_errors_name_the_path(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    stderr = one_line(fails("broker", "--data-dir", str(a_file), "--port", "0"))
    assert f"{a_file} is not a directory" in stderr
    under = a_file / "data"
    stderr = one_line(fails("broker", "--data-dir", str(under), "--port", "0"))
    assert str(under) in stderr and "is a file" in stderr
    for text in (stderr,):
        assert "listen" not in text and "bind" not in text


def test_broker_data_dir_without_permission(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        target = Path("/sys/streamkit-test-data")  # root ignores modes, but not sysfs
    else:
        (tmp_path / "ro").mkdir(mode=0o500)
        target = tmp_path / "ro" / "data"
    stderr = one_line(fails("broker", "--data-dir", str(target), "--port", "0"))
    assert str(target) in stderr and "listen" not in stderr, stderr
    assert "permission" in stderr or "Read-only" in stderr, stderr


def test_broker_port_in_use_is_refused_before_the_data_dir_is_touched(tmp_path: Path) -> None:
    """The listener is bound first: a taken port leaves neither a new data directory nor
    new partition directories (the internal topics) in an existing one."""
    existing = tmp_path / "existing"
    existing.mkdir()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for data_dir in (tmp_path / "new", existing):
            result = cli("broker", "--data-dir", str(data_dir), "--port", str(port))
            assert result.returncode == 2
            assert result.stderr == f"error: cannot listen on 127.0.0.1:{port}: Address already in use\n"
    assert not (tmp_path / "new").exists()
    assert list(existing.iterdir()) == []


class WorkerProcess:
    """``streamkit worker -A counter`` with its output in a log file."""

    def __init__(self, tmp_path: Path, data_dir: Path, bootstrap: str | None, *extra: str,
                 app_id: str | None = None, topic: str | None = None) -> None:
        self.log_path = tmp_path / f"worker-{uuid.uuid4().hex[:6]}.log"
        self.env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1",
                    "SK_TEST_APP_ID": app_id or short_name(), "SK_TEST_INPUT": topic or short_name()}
        args = [sys.executable, "-m", "streamkit", "worker", "-A", APP, "--data-dir", str(data_dir), *extra]
        if bootstrap is not None:
            args += ["--broker", bootstrap]
        with open(self.log_path, "ab") as out:
            self.process = subprocess.Popen(args, cwd=REPO, env=self.env, stdout=out, stderr=subprocess.STDOUT)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_running(self) -> None:
        wait_until(lambda: self.process.poll() is not None or "running against" in self.log(), 60,
                   lambda: f"the worker to run:\n{self.log()}")
        assert self.process.poll() is None, self.log()

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.terminate()
        return self.process.wait(30)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    started: list[WorkerProcess] = []

    def start(*args: str, data_dir: Path | None = None, bootstrap: str | None = None, **kw: str) -> WorkerProcess:
        w = WorkerProcess(tmp_path, data_dir or tmp_path / "w", bootstrap, *args, **kw)
        started.append(w)
        return w

    try:
        yield start
    finally:
        for w in started:
            w.stop()


def worker_cli(*args: str, env: dict[str, str] | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": str(REPO), "SK_TEST_APP_ID": short_name(), "SK_TEST_INPUT": short_name(),
                **(env or {})}
    return subprocess.run([sys.executable, "-m", "streamkit", "worker", *args], capture_output=True, text=True,
                          timeout=90, cwd=cwd, env=full_env)


def worker_fails(*args: str, cwd: Path = REPO) -> str:
    result = worker_cli(*args, cwd=cwd)
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_second_worker_on_a_state_dir_is_refused(broker: BrokerProcess, workers: Callable[..., WorkerProcess],
                                                 tmp_path: Path) -> None:
    first = workers(data_dir=tmp_path / "w", bootstrap=broker.bootstrap)
    first.wait_running()
    stderr = worker_fails("-A", APP, "--broker", broker.bootstrap, "--data-dir", str(tmp_path / "w"))
    assert str(tmp_path / "w" / "state") in stderr and f"process {first.process.pid}" in stderr, stderr
    assert first.process.poll() is None
    assert first.stop() == 0, first.log()


def test_worker_web_port_in_use_is_one_line(broker: BrokerProcess, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        stderr = worker_fails("-A", APP, "--broker", broker.bootstrap, "--data-dir", str(tmp_path / "w"),
                              "--web-port", str(port))
    assert f"web endpoints on 127.0.0.1:{port}" in stderr and "--web-port" in stderr, stderr


def test_worker_data_dir_under_a_file_is_one_line(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    stderr = worker_fails("-A", APP, "--data-dir", str(a_file / "data"))
    assert str(a_file / "data") in stderr, stderr


def test_app_path_errors_say_what_was_found(tmp_path: Path) -> None:
    missing = worker_fails("-A", "apps.no_such_app", cwd=REPO)
    assert "apps.no_such_app" in missing and f"working directory {REPO}" in missing
    # run from another directory: the message says where it looked
    elsewhere = worker_fails("-A", "myproject.app", cwd=tmp_path)
    assert "No module named 'myproject'" in elsewhere and f"working directory {tmp_path}" in elsewhere
    # the app is found but one of its imports is not: no advice about the directory then
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("import no_such_dependency_xyz\n")
    dependency = worker_fails("-A", "myapp", cwd=tmp_path)
    assert "No module named 'no_such_dependency_xyz'" in dependency and "working directory" not in dependency
    no_app = worker_fails("-A", "json")
    assert "defines no streamkit.App" in no_app
    wrong_attr = worker_fails("-A", f"{APP.split(':')[0]}:nothing")
    assert "has no attribute 'nothing'" in wrong_attr and "App objects in it: app" in wrong_attr
    not_an_app = worker_fails("-A", f"{APP.split(':')[0]}:counts")
    assert "does not name a streamkit.App" in not_an_app and ":counts is a Table" in not_an_app


# -- worker --set and the embedded broker's port ---------------------------------------------


def test_worker_set_unknown_or_bad_setting(tmp_path: Path) -> None:
    typo = worker_fails("-A", APP, "--data-dir", str(tmp_path / "w"), "--set", "commit.interval.msx=5")
    assert typo == "error: unknown app setting 'commit.interval.msx' (did you mean 'commit.interval.ms'?)"
    bad = worker_fails("-A", APP, "--data-dir", str(tmp_path / "w"), "--set", "commit.interval.ms=soon")
    assert "commit.interval.ms" in bad and "bad value" in bad
    assert "expects key=value" in worker_fails("-A", APP, "--set", "oops")
    assert "not both" in worker_fails("-A", APP, "--broker", "127.0.0.1:1", "--broker-port", "9092")


def test_worker_set_takes_effect(broker: BrokerProcess, workers: Callable[..., WorkerProcess]) -> None:
    """web.port and bootstrap.servers given by --set: the worker serves on that port and
    runs against that broker (without --broker it would start an embedded one)."""
    port = free_port()
    w = workers("--set", f"web.port={port}", "--set", f"bootstrap.servers={broker.bootstrap}")
    w.wait_running()
    assert f"running against {broker.bootstrap}" in w.log()
    assert f"web endpoints on http://127.0.0.1:{port}" in w.log()
    assert "embedded broker" not in w.log()
    assert w.stop() == 0, w.log()


def test_worker_embedded_broker_on_a_fixed_port(workers: Callable[..., WorkerProcess], tmp_path: Path) -> None:
    port = free_port()
    topic = short_name()
    w = workers("--broker-port", str(port), topic=topic)
    w.wait_running()
    assert f"embedded broker listening on 127.0.0.1:{port}" in w.log()
    assert f"-b 127.0.0.1:{port}" in w.log()
    # any client reaches it there
    assert topic in ok("topics", "list", "-b", f"127.0.0.1:{port}").stdout.split()
    assert w.stop() == 0, w.log()
    assert (tmp_path / "w" / "broker" / ".lock").exists()


# -- fail fast, one line, right exit code ---------------------------------------------------


TOPIC_COMMANDS = [("produce",), ("consume", "--max-messages", "1"), ("topics", "create"), ("topics", "describe"),
                  ("topics", "delete"), ("topics", "alter-config", "--set", "retention.ms=1")]


@pytest.mark.parametrize(("name", "command"), [
    ("bad topic!", c) for c in TOPIC_COMMANDS] + [(n, ("produce",)) for n in ("x" * 250, ".", "..", "ünï")])
def test_illegal_topic_names_fail_at_once(broker: BrokerProcess, name: str, command: tuple[str, ...]) -> None:
    # the topic name goes right after the (sub)command
    words = 2 if command[0] == "topics" else 1
    args = (*command[:words], name, *command[words:])
    started = time.monotonic()
    stderr = one_line(fails(*args, "-b", broker.bootstrap, stdin="a\n"))
    assert "legal topic name" in stderr or "too long" in stderr, stderr
    # at once: the broker is never asked (a client would retry metadata for ~40 s)
    assert time.monotonic() - started < 20


def test_illegal_topic_name_in_reset_offsets(broker: BrokerProcess) -> None:
    stderr = one_line(fails("groups", "reset-offsets", "g", "--topic", "a/b", "--to-earliest", "-b", broker.bootstrap))
    assert "'a/b' is not a legal topic name" in stderr


def test_bad_compression_is_one_line() -> None:
    stderr = one_line(fails("produce", "t", "--compression", "brotli", "-b", f"127.0.0.1:{free_port()}", stdin="a\n"))
    assert "--compression must be gzip, snappy, lz4 or zstd" in stderr


def test_consume_missing_topic_does_not_create_it(broker: BrokerProcess) -> None:
    name = short_name()
    for extra in ((), ("--group", short_name()), ("--partition", "0")):
        stderr = one_line(fails("consume", name, "--max-messages", "1", *extra, "-b", broker.bootstrap))
        assert f"topic {name} does not exist" in stderr
    assert name not in topics(broker.bootstrap)


def test_partition_and_offset_out_of_range(broker: BrokerProcess) -> None:
    b = ("-b", broker.bootstrap)
    name = short_name()
    ok("topics", "create", name, "--partitions", "2", *b)
    ok("produce", name, "--partition", "1", *b, stdin="a\nb\n")
    stderr = one_line(fails("produce", name, "--partition", "7", *b, stdin="x\n"))
    assert f"topic {name} has no partition 7 (it has 2)" in stderr
    stderr = one_line(fails("consume", name, "--partition", "1", "--offset", "3", "--timeout-ms", "500", *b))
    assert f"offset 3 is outside {name}-1, which holds offsets 0 to 2" in stderr
    out = ok("consume", name, "--partition", "1", "--offset", "2", "--timeout-ms", "500", *b).stdout
    assert out == ""  # the end itself is a valid place to wait
    assert [r.value for r in read_partition(broker.bootstrap, name, 1)] == [b"a", b"b"]


def test_describe_missing_group_fails(broker: BrokerProcess) -> None:
    stderr = one_line(fails("groups", "describe", short_name(), "-b", broker.bootstrap))
    assert "does not exist" in stderr


def test_partial_produce_says_what_was_written(broker: BrokerProcess) -> None:
    name = short_name()
    b = ("-b", broker.bootstrap)
    stderr = one_line(fails("produce", name, "--key-separator", ":", *b, stdin="k1:v1\nno separator\nk3:v3\n"))
    assert "line 2" in stderr and "line 1 was written" in stderr, stderr
    assert [(r.key, r.value) for r in read_partition(broker.bootstrap, name, 0)] == [(b"k1", b"v1")]
    stderr = one_line(fails("produce", name, "--key-separator", ":", *b, stdin="k4:v4\nk5:v5\nbad\n"))
    assert "line 3" in stderr and "lines 1 to 2 were written" in stderr, stderr
    stderr = one_line(fails("produce", name, "--key-separator", ":", *b, stdin="bad\n"))
    assert "no line was written" in stderr
    assert len(read_partition(broker.bootstrap, name, 0)) == 3


# -- produce timestamps, topics describe, alter-config --------------------------------------


def test_produce_with_timestamps(broker: BrokerProcess) -> None:
    b = ("-b", broker.bootstrap)
    name = short_name()
    ok("produce", name, "--timestamp", "1700000000000", *b, stdin="a\nb\n")
    ok("produce", name, "--timestamp-separator", ",", "--key-separator", ":", *b,
       stdin="1000,k:x\n61000,k:y\n")
    records = read_partition(broker.bootstrap, name, 0)
    assert [(r.timestamp, r.key, r.value) for r in records] == [
        (1700000000000, None, b"a"), (1700000000000, None, b"b"), (1000, b"k", b"x"), (61000, b"k", b"y")]
    out = ok("consume", name, "--from-beginning", "--max-messages", "4", "--print-timestamp", "--print-key", *b).stdout
    assert out.splitlines()[2:] == ["CreateTime:1000\tk\tx", "CreateTime:61000\tk\ty"]
    stderr = one_line(fails("produce", name, "--timestamp-separator", ",", *b, stdin="2000,ok\nsoon,bad\n"))
    assert "line 2" in stderr and "'soon' is not epoch milliseconds" in stderr and "line 1 was written" in stderr
    assert "not both" in fails("produce", name, "--timestamp", "1", "--timestamp-separator", ",", *b)


def test_topics_describe_offsets_and_overrides(broker: BrokerProcess) -> None:
    b = ("-b", broker.bootstrap)
    name = short_name()
    ok("topics", "create", name, "--partitions", "2", "--config", "segment.bytes=1048576", *b)
    ok("produce", name, "--partition", "1", *b, stdin="".join(f"v{i}\n" for i in range(5)))
    out = ok("topics", "describe", name, *b).stdout
    # partition, leader, replicas, isr, earliest, latest, records (a single broker: id 0)
    assert table_rows(out) == [["0", "0", "0", "0", "0", "0", "0"], ["1", "0", "0", "0", "0", "5", "5"]]
    lines = out.splitlines()
    assert "  segment.bytes=1048576  (override)" in lines
    assert "  retention.ms=604800000" in lines  # the broker's default, not marked


def test_alter_config_did_you_mean(broker: BrokerProcess) -> None:
    name = short_name()
    ok("topics", "create", name, "-b", broker.bootstrap)
    stderr = one_line(fails("topics", "alter-config", name, "--set", "retention.msx=1", "-b", broker.bootstrap))
    assert stderr == "error: unknown topic config 'retention.msx' (did you mean 'retention.ms'?)\n"
    stderr = one_line(fails("topics", "alter-config", name, "--delete", "cleanup.polcy", "-b", broker.bootstrap))
    assert "did you mean 'cleanup.policy'" in stderr
    # topics create: the broker's refusal carries the hint
    stderr = one_line(fails("topics", "create", short_name(), "--config", "retention.msx=1", "-b", broker.bootstrap))
    assert "unknown topic config 'retention.msx' (did you mean 'retention.ms'?)" in stderr


def test_tables_are_not_truncated_when_piped(broker: BrokerProcess) -> None:
    b = ("-b", broker.bootstrap)
    name = "long-" + "n" * 150
    group = short_name()
    ok("produce", name, *b, stdin="a\n")
    ok("consume", name, "--group", group, "--from-beginning", "--max-messages", "1", *b)
    rows = table_rows(ok("groups", "describe", group, *b).stdout)
    assert rows == [[name, "0", "1", "1", "0"]]


# -- groups reset-offsets ---------------------------------------------------------------------


def test_reset_offsets_by_partition_time_and_dry_run(broker: BrokerProcess) -> None:
    b = ("-b", broker.bootstrap)
    name, group = short_name(), short_name()
    ok("topics", "create", name, "--partitions", "2", *b)
    for p in (0, 1):
        ok("produce", name, "--partition", str(p), "--timestamp-separator", ",", *b,
           stdin="".join(f"{1000 * (i + 1)},v{i}\n" for i in range(6)))  # timestamps 1000..6000
    ok("consume", name, "--group", group, "--from-beginning", "--max-messages", "12", *b)
    assert committed(broker.bootstrap, group, name, 2) == {0: 6, 1: 6}

    # the dry run is the default, and --dry-run says so explicitly: nothing changes
    for dry in ((), ("--dry-run",)):
        result = cli("groups", "reset-offsets", group, "--topic", name, "--to-timestamp", "3500", *dry, *b)
        assert result.returncode == 0 and "dry run" in result.stderr, result.stderr
        assert table_rows(result.stdout) == [[name, "0", "6", "3", "0", "6"], [name, "1", "6", "3", "0", "6"]]
    assert committed(broker.bootstrap, group, name, 2) == {0: 6, 1: 6}
    assert "not both" in fails("groups", "reset-offsets", group, "--topic", name, "--to-latest", "--dry-run",
                               "--execute", *b)

    # one partition, by time: the first record at or after 3500 ms is offset 3
    ok("groups", "reset-offsets", group, "--topic", name, "--partition", "1", "--to-timestamp", "3500",
       "--execute", *b)
    assert committed(broker.bootstrap, group, name, 2) == {0: 6, 1: 3}
    # after the last record: the end
    ok("groups", "reset-offsets", group, "--topic", name, "--to-timestamp", "99999", "--execute", *b)
    assert committed(broker.bootstrap, group, name, 2) == {0: 6, 1: 6}

    # beyond a partition's end: refused, nothing committed
    stderr = one_line(fails("groups", "reset-offsets", group, "--topic", name, "--partition", "0",
                            "--to-offset", "7", "--execute", *b))
    assert f"{name}-0" in stderr and "0 to 6" in stderr
    assert committed(broker.bootstrap, group, name, 2) == {0: 6, 1: 6}
    ok("groups", "reset-offsets", group, "--topic", name, "--partition", "0", "--to-offset", "6", "--execute", *b)
    assert "no partition 5" in one_line(fails("groups", "reset-offsets", group, "--topic", name, "--partition",
                                              "5", "--to-earliest", *b))


# -- a consumer waiting for its group --------------------------------------------------------


def test_consume_group_says_it_waits_for_the_rebalance_delay(broker_factory: Callable[..., BrokerProcess]) -> None:
    slow = broker_factory(settings={"group.initial.rebalance.delay.ms": "3000"})
    name = short_name()
    ok("produce", name, "-b", slow.bootstrap, stdin="a\n")
    result = ok("consume", name, "--group", short_name(), "--from-beginning", "--max-messages", "1",
                "-b", slow.bootstrap)
    assert result.stdout == "a\n"
    assert "waiting to join consumer group" in result.stderr and "group.initial.rebalance.delay.ms" in result.stderr


# -- a CLI that explains itself --------------------------------------------------------------


def test_version_and_short_help() -> None:
    from streamkit import __version__

    assert ok("--version").stdout.strip() == __version__
    for command in ((), ("topics",), ("produce",), ("groups", "reset-offsets"), ("worker",)):
        out = ok(*command, "-h").stdout
        assert "Usage:" in out and "--help" in out
    # defaults are shown, also those computed at run time
    assert "[default: (./data/{application.id})]" in " ".join(ok("worker", "-h").stdout.split())


def _first_sentence(text: str) -> str:
    paragraph = " ".join(text.split("\n\n")[0].split())
    found = re.match(r"(.+?\.)(\s|$)", paragraph)
    return found.group(1) if found else paragraph


def test_help_in_80_columns_is_whole() -> None:
    """Every command's -h in an 80-column terminal: no line wider, every option's help and
    every sub-command's first sentence there in full (wrapped, never cut), and flags shown
    without a value type."""
    import typer
    from typer.testing import CliRunner

    from streamkit.cli import app

    runner = CliRunner(env={"COLUMNS": "80"})
    checked = []

    def check(command: Any, path: tuple[str, ...]) -> None:
        result = runner.invoke(app, [*path, "-h"])
        assert result.exit_code == 0, result.output
        out = result.output
        assert max(len(line) for line in out.splitlines()) <= 80, out
        assert "<bool>" not in out and "…" not in out, out
        flat = " ".join(out.split())
        for param in command.params:
            if param.help:
                assert " ".join(param.help.split()) in flat, (path, param.name, out)
        for name, sub in getattr(command, "commands", {}).items():
            assert f"{name} {_first_sentence(sub.help)}" in flat, (path, name, out)
            check(sub, (*path, name))
        checked.append(path)

    check(typer.main.get_command(app), ())
    assert ("groups", "reset-offsets") in checked and ("connect", "standalone") in checked


def test_every_command_and_option_has_help() -> None:
    import typer

    from streamkit.cli import app

    missing: list[str] = []
    seen: list[str] = []

    def walk(command: Any, path: str) -> None:
        seen.append(path)
        if not (command.help or command.short_help):
            missing.append(path)
        for param in command.params:
            if param.name != "help" and not getattr(param, "help", None):
                missing.append(f"{path} {param.name}")
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}")

    walk(typer.main.get_command(app), "streamkit")
    assert "streamkit groups reset-offsets" in seen and "streamkit worker" in seen  # the walk went deep
    assert missing == []


# -- logs a user reads ------------------------------------------------------------------------

# A Python repr in a log line ([('t', 0), ...], {'k': 'v'}, ('a', 1)), an enum's repr, or a
# space where none belongs (two in a row, before punctuation, at the end).
_NOT_PRODUCT = re.compile(r"\[\(|\{'|\('|<\w+\.\w+: |  | [,.;:)]| $")


def test_worker_and_broker_logs_read_like_a_product(broker_factory: Callable[..., BrokerProcess],
                                                    workers: Callable[..., WorkerProcess], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Two exactly-once workers with standby tasks, and their broker, at log level info:
    partitions read as topic[ranges], tasks as ranges, topic configs as key=value."""
    broker = broker_factory()
    topic, app_id = short_name(), short_name()
    ok("topics", "create", topic, "--partitions", "4", "-b", broker.bootstrap)
    monkeypatch.setenv("SK_TEST_CONFIG", '{"processing.guarantee": "exactly_once", "num.standby.replicas": 1}')
    first = workers(bootstrap=broker.bootstrap, app_id=app_id, topic=topic, data_dir=tmp_path / "w1")
    wait_until(lambda: "partitions assigned" in first.log(), 60, lambda: f"the first assignment:\n{first.log()}")
    second = workers(bootstrap=broker.bootstrap, app_id=app_id, topic=topic, data_dir=tmp_path / "w2")
    wait_until(lambda: "partitions assigned" in second.log() and "standby tasks" in first.log() + second.log(),
               90, lambda: f"the rebalance with standby tasks:\n{first.log()}\n{second.log()}")
    assert first.stop() == 0 and second.stop() == 0
    worker_lines = first.log().splitlines() + second.log().splitlines()

    def messages(lines: list[str], logger: str) -> list[str]:
        return [line.split(f" {logger}: ", 1)[1] for line in lines if f" {logger}: " in line]

    runtime = messages(worker_lines, "streamkit.streams.runtime")
    assert f"partitions assigned: {topic}[0-3]" in runtime  # the first worker, alone
    partitions = re.escape(topic) + r"\[[0-9,-]+\]"
    assert [m for m in runtime if re.fullmatch(f"partitions (assigned|revoked): {partitions}", m)] == [
        m for m in runtime if m.startswith("partitions ")]
    tasks = messages(worker_lines, "streamkit.streams.task_manager") + messages(
        worker_lines, "streamkit.streams.collector")
    assert any(re.fullmatch(r"standby tasks: [0-9,-]+", m) for m in tasks), tasks
    assert any(re.fullmatch(r"exactly-once: transactional producers of tasks [0-9,-]+ ready", m) for m in tasks)

    created = messages(broker.log_file.read_text().splitlines(), "streamkit.broker.topics")
    assert f"created topic {topic} with 4 partitions" in created
    assert f"created topic {app_id}-counts-changelog with 4 partitions (cleanup.policy=compact)" in created
    assert any(re.fullmatch(r"created topic __consumer_offsets with \d+ partitions \(cleanup.policy=compact, "
                            r"segment.bytes=\d+\)", m) for m in created), created

    for line in worker_lines + broker.log_file.read_text().splitlines():
        message = line.split(": ", 1)[-1]
        assert not _NOT_PRODUCT.search(message), line


def test_broker_with_an_unreachable_zookeeper_ends_with_one_error_line(tmp_path: Path) -> None:
    port = free_port()  # nothing listens on it
    result = cli("broker", "--data-dir", str(tmp_path / "data"), "--port", "0", "--set", "broker.id=0",
                 "--set", f"zookeeper.connect=127.0.0.1:{port}", "--set", "zookeeper.connection.timeout.ms=1000")
    # before it, the broker's log says how it tried (kazoo's attempts); then one error line
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    last = result.stderr.splitlines()[-1]
    assert last == f"error: cannot reach ZooKeeper at 127.0.0.1:{port} (Connection time-out)", result.stderr
