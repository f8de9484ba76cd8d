"""The ``streamkit`` command. It parses arguments and delegates; no logic lives here."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from streamkit import __version__
from streamkit.log.inspect import SegmentSummary, dump_records, summarize_partition

app = typer.Typer(
    name="streamkit",
    help=(
        "streamkit: stream processing in Python on a Kafka-compatible broker and partition log.\n\n"
        "Run `streamkit COMMAND --help` for the options of a command."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err = Console(stderr=True)


def _fail(message: str) -> typer.Exit:
    # markup=False: messages may contain brackets (regexes, lists) that are not rich markup
    err.print(f"error: {message}", highlight=False, soft_wrap=True, markup=False)
    return typer.Exit(code=2)


@app.command()
def version() -> None:
    """Print the streamkit version."""
    console.print(__version__)


@app.command("dump-log")
def dump_log(
    path: Path = typer.Argument(..., help="a partition directory (or one .log segment file)"),
    records: bool = typer.Option(False, "--records", help="decode and print every record"),
    limit: int = typer.Option(50, "--limit", help="print at most this many records"),
) -> None:
    """Inspect a partition directory on disk, like Kafka's kafka-dump-log.sh."""
    if not path.exists():
        raise _fail(f"{path} does not exist")
    directory = path if path.is_dir() else path.parent
    try:
        summary = summarize_partition(directory)
    except (OSError, ValueError) as exc:
        raise _fail(f"cannot read {directory}: {exc}") from exc
    table = Table(title=f"partition {directory}")
    for col in ("segment", "base offset", "next offset", "batches", "bytes", "max timestamp"):
        table.add_column(col, justify="left" if col == "segment" else "right", no_wrap=True)
    for seg in summary:
        table.add_row(*_segment_row(seg))
    console.print(table)
    if records:
        for line in dump_records(directory, limit):
            console.print(line, highlight=False, markup=False)


@app.command()
def broker(
    data_dir: Path | None = typer.Option(
        None, "--data-dir", help="where partition logs live (default: log.dirs, else data/broker)"),
    host: str | None = typer.Option(None, "--host", help="address to bind (default: listeners, else 127.0.0.1)"),
    port: int | None = typer.Option(None, "--port", help="port to bind, 0: any free port (default: listeners, else 9092)"),
    config_file: Path | None = typer.Option(None, "--config", help="a server.properties file"),
    overrides: list[str] = typer.Option([], "--set", help="override a setting: key=value (Kafka's names)"),
    ready_file: Path | None = typer.Option(None, "--ready-file", help="write the bound port here once listening"),
    loglevel: str = typer.Option("info", "--loglevel", help="debug, info, warning or error"),
) -> None:
    """Run a Kafka-protocol broker: any Kafka client or tool can produce and consume."""
    from streamkit.broker.config import BrokerConfig, read_properties
    from streamkit.broker.run import placement, run_broker
    from streamkit.log.errors import ConfigError

    _setup_logging(loglevel)
    try:
        settings = read_properties(config_file) if config_file else {}
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"--set expects key=value, got {item!r}")
            settings[key.strip()] = value.strip()
        config = BrokerConfig.from_kafka(settings)
    except ConfigError as exc:
        raise _fail(str(exc)) from exc
    data_dir, host, port = placement(config, data_dir, host, port)
    try:
        run_broker(data_dir, config, host, port, ready_file)
    except OSError as exc:
        raise _fail(f"cannot start the broker on {host}:{port}: {exc.strerror or exc}") from exc


BootstrapOption = typer.Option(
    "127.0.0.1:9092", "--bootstrap-server", "-b", envvar="STREAMKIT_BOOTSTRAP_SERVER",
    help="host:port of any Kafka-protocol broker (streamkit or Apache Kafka)",
)
topics_app = typer.Typer(help="Create, list, describe, delete and configure topics.", no_args_is_help=True)
groups_app = typer.Typer(help="List and describe consumer groups; reset their offsets.", no_args_is_help=True)
app.add_typer(topics_app, name="topics")
app.add_typer(groups_app, name="groups")


def _run(coro: Any) -> Any:
    """Run a client coroutine; ClientError becomes a one-line message and exit code 2."""
    import logging

    from streamkit.clients.admin import ClientError

    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # errors are reported once, below
    try:
        return asyncio.run(coro)
    except ClientError as exc:
        raise _fail(str(exc)) from None


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise _fail(f"{what} expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


@topics_app.command("create")
def topics_create(
    name: str = typer.Argument(..., help="topic name"),
    partitions: int = typer.Option(1, "--partitions", "-p", min=1),
    config: list[str] = typer.Option([], "--config", "-c", help="topic config key=value (Kafka's names)"),
    if_not_exists: bool = typer.Option(False, "--if-not-exists"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Create a topic."""
    from streamkit.clients.admin import create_topic

    _run(create_topic(bootstrap, name, partitions, _pairs(config, "--config"), if_not_exists))
    console.print(f"created topic {name}")


@topics_app.command("list")
def topics_list(
    internal: bool = typer.Option(False, "--internal", help="include internal topics"),
    bootstrap: str = BootstrapOption,
) -> None:
    """List topic names."""
    from streamkit.clients.admin import list_topics

    for name in _run(list_topics(bootstrap, internal)):
        console.print(name, highlight=False)


@topics_app.command("describe")
def topics_describe(name: str = typer.Argument(...), bootstrap: str = BootstrapOption) -> None:
    """Show a topic's partitions and configs."""
    from streamkit.clients.admin import describe_topic

    d = _run(describe_topic(bootstrap, name))
    console.print(f"topic {d.name}: {d.partitions} partitions{' (internal)' if d.internal else ''}")
    for key, value in sorted(d.configs.items()):
        console.print(f"  {key}={value}", highlight=False)


@topics_app.command("delete")
def topics_delete(name: str = typer.Argument(...), bootstrap: str = BootstrapOption) -> None:
    """Delete a topic and its data."""
    from streamkit.clients.admin import delete_topic

    _run(delete_topic(bootstrap, name))
    console.print(f"deleted topic {name}")


@topics_app.command("alter-config")
def topics_alter_config(
    name: str = typer.Argument(...),
    set_: list[str] = typer.Option([], "--set", help="key=value to set"),
    delete: list[str] = typer.Option([], "--delete", help="key to reset to the default"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Set or remove a topic's config overrides."""
    from streamkit.clients.admin import alter_topic_config

    if not set_ and not delete:
        raise _fail("nothing to change: give --set key=value or --delete key")
    _run(alter_topic_config(bootstrap, name, _pairs(set_, "--set"), delete))
    console.print(f"altered configs of {name}")


@app.command()
def produce(
    topic: str = typer.Argument(...),
    key_separator: str | None = typer.Option(None, "--key-separator", help="split each line into key and value"),
    partition: int | None = typer.Option(None, "--partition"),
    acks: str = typer.Option("all", "--acks", help="0, 1 or all"),
    compression: str | None = typer.Option(None, "--compression", help="gzip, snappy, lz4 or zstd"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Produce one record per line of standard input."""
    from streamkit.clients.console import produce_lines, stdin_lines

    if acks not in ("0", "1", "all", "-1"):
        raise _fail("--acks must be 0, 1 or all")
    sent = _run(produce_lines(bootstrap, topic, stdin_lines(), key_separator, partition,
                              "all" if acks == "-1" else acks, compression))
    err.print(f"produced {sent} records to {topic}")


@app.command()
def consume(
    topic: str = typer.Argument(...),
    group: str | None = typer.Option(None, "--group", "-g", help="consume as part of this group"),
    from_beginning: bool = typer.Option(False, "--from-beginning"),
    partition: int | None = typer.Option(None, "--partition"),
    offset: int | None = typer.Option(None, "--offset", help="with --partition: start here"),
    max_messages: int | None = typer.Option(None, "--max-messages", min=1),
    timeout_ms: int | None = typer.Option(None, "--timeout-ms", help="stop after this long without records"),
    print_key: bool = typer.Option(False, "--print-key"),
    key_separator: str = typer.Option("\t", "--key-separator"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Print a topic's records, one value per line."""
    from streamkit.clients.console import consume_lines

    if offset is not None and partition is None:
        raise _fail("--offset needs --partition")
    separator = key_separator.encode().decode("unicode_escape")
    _run(consume_lines(bootstrap, topic, group, from_beginning, partition, offset, max_messages,
                       timeout_ms, lambda line: print(line, flush=True), print_key, separator))


@groups_app.command("list")
def groups_list(bootstrap: str = BootstrapOption) -> None:
    """List consumer groups."""
    from streamkit.clients.admin import list_groups

    for group, protocol in _run(list_groups(bootstrap)):
        console.print(f"{group}\t{protocol}", highlight=False)


@groups_app.command("describe")
def groups_describe(group: str = typer.Argument(...), bootstrap: str = BootstrapOption) -> None:
    """Show a group's state, members, committed offsets and lag."""
    from streamkit.clients.admin import describe_group

    state, members, lags = _run(describe_group(bootstrap, group))
    console.print(f"group {group}: {state}, {len(members)} members", highlight=False)
    for m in members:
        parts = ", ".join(f"{tp.topic}-{tp.partition}" for tp in m.assignment)
        console.print(f"  {m.member_id} ({m.client_id}@{m.host}): {parts}", highlight=False)
    table = Table()
    for col in ("topic", "partition", "committed", "end offset", "lag"):
        table.add_column(col)
    for lag in lags:
        table.add_row(lag.topic, str(lag.partition), str(lag.committed), str(lag.end_offset), str(lag.lag))
    console.print(table)


@groups_app.command("reset-offsets")
def groups_reset_offsets(
    group: str = typer.Argument(...),
    topic: str = typer.Option(..., "--topic"),
    to_earliest: bool = typer.Option(False, "--to-earliest"),
    to_latest: bool = typer.Option(False, "--to-latest"),
    to_offset: int | None = typer.Option(None, "--to-offset"),
    execute: bool = typer.Option(False, "--execute", help="commit (without it: a dry run)"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Move a group's committed offsets (the group must have no active members)."""
    from streamkit.clients.admin import reset_offsets

    chosen = [name for name, on in (("earliest", to_earliest), ("latest", to_latest),
                                   ("offset", to_offset is not None)) if on]
    if len(chosen) != 1:
        raise _fail("give exactly one of --to-earliest, --to-latest, --to-offset N")
    targets = _run(reset_offsets(bootstrap, group, topic, chosen[0], to_offset, execute))
    for tp, off in sorted(targets.items(), key=lambda kv: kv[0].partition):
        console.print(f"{tp.topic}\t{tp.partition}\t{off}", highlight=False)
    if not execute:
        err.print("dry run: add --execute to commit these offsets")


@app.command()
def worker(
    app_path: str = typer.Option(..., "--app", "-A", help="the app: package.module:app (or package.module)"),
    broker: str | None = typer.Option(None, "--broker", "-b", help="Kafka bootstrap host:port (default: an embedded broker)"),
    data_dir: Path | None = typer.Option(None, "--data-dir", help="state stores and the embedded broker's data"),
    web_port: int | None = typer.Option(None, "--web-port", help="serve /health, /metrics and /tables on this port"),
    loglevel: str = typer.Option("info", "--loglevel", "-l", help="debug, info, warning or error"),
) -> None:
    """Run a stream app's agents, tables and pipelines (one worker of its consumer group)."""
    import logging

    from streamkit.streams.dsl import CoPartitionError
    from streamkit.streams.runtime import StartupError
    from streamkit.streams.settings import SettingsError
    from streamkit.streams.worker import AppLoadError, run_worker

    _setup_logging(loglevel)
    if loglevel.lower() != "debug":
        logging.getLogger("aiokafka").setLevel(logging.ERROR)
    try:
        code = run_worker(app_path, broker, data_dir, web_port)
    except (AppLoadError, SettingsError, StartupError, CoPartitionError) as exc:
        raise _fail(str(exc)) from None
    except KeyboardInterrupt:
        code = 0
    raise typer.Exit(code)


connect_app = typer.Typer(help="Run Kafka Connect workers: connectors from JSON configs, REST API.",
                          no_args_is_help=True)
app.add_typer(connect_app, name="connect")


@connect_app.command("standalone")
def connect_standalone(
    worker_config: Path = typer.Argument(..., help="worker.json (or .properties) with Kafka Connect's worker keys"),
    connector_configs: list[Path] = typer.Argument(None, help='connector configs: {"name": ..., "config": {...}}'),
    ready_file: Path | None = typer.Option(None, "--ready-file", help="write the REST port here once serving"),
    loglevel: str = typer.Option("info", "--loglevel", "-l", help="debug, info, warning or error"),
) -> None:
    """Run one Connect worker with its offsets in a local file (Kafka's connect-standalone)."""
    from streamkit.connect.errors import ConfigError
    from streamkit.connect.standalone import run_standalone

    _connect_logging(loglevel)
    for path in [worker_config, *(connector_configs or [])]:
        if not path.is_file():
            raise _fail(f"{path} does not exist")
    try:
        run_standalone(worker_config, connector_configs or [], ready_file)
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    except OSError as exc:
        raise _fail(f"cannot start the Connect worker: {exc.strerror or exc}") from None


@connect_app.command("distributed")
def connect_distributed(
    worker_config: Path = typer.Argument(..., help="worker.json with group.id and the *.storage.topic keys"),
    ready_file: Path | None = typer.Option(None, "--ready-file", help="write the REST port here once serving"),
    loglevel: str = typer.Option("info", "--loglevel", "-l", help="debug, info, warning or error"),
) -> None:
    """Run one worker of a Connect cluster: configs, offsets and status in compacted topics."""
    from streamkit.connect.distributed_worker import run_distributed
    from streamkit.connect.errors import ConfigError

    _connect_logging(loglevel)
    if not worker_config.is_file():
        raise _fail(f"{worker_config} does not exist")
    try:
        run_distributed(worker_config, ready_file)
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    except OSError as exc:
        raise _fail(f"cannot start the Connect worker: {exc.strerror or exc}") from None


def _connect_logging(loglevel: str) -> None:
    import logging

    _setup_logging(loglevel)
    if loglevel.lower() != "debug":
        logging.getLogger("aiokafka").setLevel(logging.ERROR)


def _setup_logging(level: str) -> None:
    import logging

    numeric = getattr(logging, level.upper(), None)
    if not isinstance(numeric, int):
        raise _fail(f"unknown log level {level!r}")
    logging.basicConfig(level=numeric, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _segment_row(seg: SegmentSummary) -> list[str]:
    return [
        seg.name, str(seg.base_offset), str(seg.next_offset), str(seg.batches), str(seg.size),
        str(seg.max_timestamp),
    ]


def main() -> None:
    app()


if __name__ == "__main__":
    main()
