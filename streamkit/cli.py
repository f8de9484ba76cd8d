"""The ``streamkit`` command. It parses arguments and delegates; no logic lives here."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from streamkit import __version__
from streamkit.log.inspect import SegmentSummary, dump_records, summarize_partition

# -h as well as --help, on every command (click passes it down to sub-commands)
CONTEXT = {"help_option_names": ["-h", "--help"]}


def _typer(**kwargs: Any) -> typer.Typer:
    # rich_markup_mode=None: click's plain help, which wraps text to the terminal instead of
    # cutting it in narrow table cells and shows no type for flags; usage errors are click's
    # lines, not a box.
    return typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                       context_settings=CONTEXT, rich_markup_mode=None, **kwargs)


app = _typer(
    name="streamkit",
    help=(
        "streamkit: stream processing in Python on a Kafka-compatible broker and partition log.\n\n"
        "Run `streamkit COMMAND -h` for the options of a command."
    ),
)

# Piped output is for other programs and files: rich's default of 80 columns would
# truncate table cells and wrap lines there, so only a terminal (or $COLUMNS) sets a width.
_PIPE_WIDTH = 10_000


def _console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    wide = not stream.isatty() and "COLUMNS" not in os.environ
    return Console(stderr=stderr, width=_PIPE_WIDTH if wide else None)


console = _console()
err = _console(stderr=True)


def _fail(message: str) -> typer.Exit:
    # markup=False: messages may contain brackets (regexes, lists) that are not rich markup
    err.print(f"error: {message}", highlight=False, soft_wrap=True, markup=False)
    return typer.Exit(code=2)


def _print_version(value: bool) -> None:
    if value:
        print(__version__)
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", "-V", callback=_print_version, is_eager=True,
                                 help="Print the streamkit version and exit."),
) -> None:
    """streamkit: stream processing in Python on a Kafka-compatible broker and partition log.

    Run `streamkit COMMAND -h` for the options of a command."""


@app.command()
def version() -> None:
    """Print the streamkit version."""
    console.print(__version__)


@app.command("dump-log")
def dump_log(
    path: Path = typer.Argument(..., metavar="PATH", help="A partition directory (or one .log segment file)."),
    records: bool = typer.Option(False, "--records", help="Decode and print every record."),
    limit: int = typer.Option(50, "--limit", metavar="N", help="Print at most this many records."),
) -> None:
    """Inspect a partition directory on disk. Like kafka-dump-log.sh."""
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
        None, "--data-dir", metavar="DIR", show_default="log.dirs, else ./data/broker",
        help="Where partition logs live; locked (DIR/.lock) while the broker runs."),
    host: str | None = typer.Option(None, "--host", metavar="HOST", show_default="listeners, else 127.0.0.1",
                                    help="Address to bind."),
    port: int | None = typer.Option(None, "--port", metavar="PORT", show_default="listeners, else 9092",
                                    help="Port to bind; 0: any free port."),
    config_file: Path | None = typer.Option(None, "--config", metavar="FILE",
                                            help="A Kafka server.properties file."),
    overrides: list[str] = typer.Option([], "--set", metavar="KEY=VALUE",
                                        help="Override a setting: key=value (Kafka's names); repeatable."),
    ready_file: Path | None = typer.Option(None, "--ready-file", metavar="FILE",
                                           help="Write the bound port here once listening (with several listeners, "
                                                "NAME=port lines follow)."),
    loglevel: str = typer.Option("info", "--loglevel", metavar="LEVEL", help="debug, info, warning or error."),
) -> None:
    """Run a Kafka-protocol broker.

    Any Kafka client or tool can produce to it and consume from it."""
    from streamkit.broker.cluster.zk import ZkConnectError
    from streamkit.broker.config import BrokerConfig, read_properties
    from streamkit.broker.run import placement, run_broker
    from streamkit.dirlock import DataDirectoryError
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
    except (DataDirectoryError, ConfigError, ZkConnectError) as exc:
        raise _fail(str(exc)) from None
    except OSError as exc:
        raise _fail(_os_error(exc, f"cannot listen on {host}:{port}")) from None


BootstrapOption = typer.Option(
    "127.0.0.1:9092", "--bootstrap-server", "-b", metavar="HOST:PORT[,...]", envvar="STREAMKIT_BOOTSTRAP_SERVER",
    help="host:port of any Kafka-protocol broker (streamkit or Apache Kafka); of a cluster, several "
         "separated by commas.",
)
topics_app = _typer(help="Create, list, describe, delete and configure topics.")
groups_app = _typer(help="List and describe consumer groups; reset their offsets.")
app.add_typer(topics_app, name="topics")
app.add_typer(groups_app, name="groups")
users_app = _typer(help="Create, describe and delete SCRAM users. SCRAM-SHA-256 and SCRAM-SHA-512.")
app.add_typer(users_app, name="users")
acls_app = _typer(help="Add, list and remove ACLs (as kafka-acls.sh does).")
app.add_typer(acls_app, name="acls")


def _run(coro: Any) -> Any:
    """Run a client coroutine; ClientError becomes a one-line message and exit code 2."""
    import logging

    from aiokafka.errors import KafkaError

    from streamkit.clients.errors import ClientError

    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # errors are reported once, below
    try:
        return asyncio.run(coro)
    except ClientError as exc:
        raise _fail(str(exc)) from None
    except KafkaError as exc:  # one the client tools did not expect: still one line
        raise _fail(f"{type(exc).__name__}: {exc}") from None


def _use_client_options(items: list[str]) -> list[str]:
    from streamkit.clients.security import use_client_config

    use_client_config(_pairs(items, "--client-config"), from_file=False)
    return items


def _use_command_config(path: Path | None) -> Path | None:
    from streamkit.clients.errors import ClientError
    from streamkit.clients.security import read_client_properties, use_client_config

    if path is not None:
        try:
            use_client_config(read_client_properties(path), from_file=True)
        except ClientError as exc:
            raise _fail(str(exc)) from None
    return path


# Every command that talks to a broker takes both; their callbacks hand the settings to
# streamkit.clients.security, where each client of the command is built.
ClientConfigOption = typer.Option(
    [], "--client-config", "-X", metavar="KEY=VALUE", callback=_use_client_options,
    help="A client setting (librdkafka's names: security.protocol, sasl.mechanism, sasl.username, "
         "sasl.password, ssl.ca.location ...); repeatable; wins over --command-config.")
CommandConfigOption = typer.Option(
    None, "--command-config", metavar="FILE", callback=_use_command_config,
    help="A properties file of client settings, as Kafka's tools take (security.protocol, sasl.mechanism, "
         "sasl.username, sasl.password or sasl.jaas.config, ssl.ca.location or ssl.truststore.location, "
         "ssl.certificate.location, ssl.key.location).")


def _users(call: Any) -> Any:
    """Run a users command; ClientError becomes one line."""
    from streamkit.clients.errors import ClientError

    try:
        return call()
    except ClientError as exc:
        raise _fail(str(exc)) from None


@users_app.command("create")
def users_create(
    name: str = typer.Argument(..., metavar="NAME", help="User name."),
    password: str = typer.Option(..., "--password", metavar="PASSWORD", envvar="STREAMKIT_USER_PASSWORD",
                                 help="The password (or $STREAMKIT_USER_PASSWORD)."),
    mechanism: list[str] = typer.Option(["SCRAM-SHA-256"], "--mechanism", metavar="MECHANISM",
                                        help="SCRAM-SHA-256 or SCRAM-SHA-512; repeatable."),
    iterations: int = typer.Option(4096, "--iterations", metavar="N", help="PBKDF2 iterations (4096..16384)."),
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    bootstrap: str = BootstrapOption,
) -> None:
    """Create a SCRAM user, or change its password. AlterUserScramCredentials."""
    from streamkit.clients.users import create_user

    config = _pairs(client_config, "--client-config")
    for m in mechanism:
        _users(lambda m=m: create_user(bootstrap, name, password, m, iterations, config))
    console.print(f"user {name}: {', '.join(m.upper() for m in mechanism)} set", highlight=False)


@users_app.command("describe")
def users_describe(
    names: list[str] = typer.Argument(None, metavar="[NAME]...", help="User names; none: every user."),
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    bootstrap: str = BootstrapOption,
) -> None:
    """Show users' SCRAM mechanisms and iterations. Never a password or hash."""
    from streamkit.clients.users import describe_users

    config = _pairs(client_config, "--client-config")
    for user in _users(lambda: describe_users(bootstrap, names or None, config)):
        shown = ", ".join(f"{m} (iterations={i})" for m, i in user.mechanisms.items())
        console.print(f"{user.user}: {shown}", highlight=False)


@users_app.command("delete")
def users_delete(
    name: str = typer.Argument(..., metavar="NAME", help="User name."),
    mechanism: list[str] = typer.Option([], "--mechanism", metavar="MECHANISM",
                                        help="Only this mechanism's credential; repeatable (default: all)."),
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    bootstrap: str = BootstrapOption,
) -> None:
    """Delete a SCRAM user's credentials: its next login is refused."""
    from streamkit.clients.users import delete_user

    config = _pairs(client_config, "--client-config")
    deleted = _users(lambda: delete_user(bootstrap, name, mechanism or None, config))
    console.print(f"user {name}: {', '.join(deleted)} deleted", highlight=False)


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
    name: str = typer.Argument(..., metavar="NAME",
                               help="Topic name: letters, digits, '.', '_', '-' (at most 249)."),
    partitions: int = typer.Option(1, "--partitions", "-p", metavar="N", min=1, help="Number of partitions."),
    config: list[str] = typer.Option([], "--config", "-c", metavar="KEY=VALUE",
                                     help="Topic config key=value (Kafka's names); repeatable."),
    replication_factor: int = typer.Option(
        -1, "--replication-factor", "-r", metavar="N", show_default="the broker's default.replication.factor",
        help="Copies of each partition, on as many brokers."),
    if_not_exists: bool = typer.Option(False, "--if-not-exists", help="Succeed if the topic already exists."),
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    bootstrap: str = BootstrapOption,
) -> None:
    """Create a topic."""
    from streamkit.clients.admin import create_topic

    if replication_factor == 0 or replication_factor < -1:
        raise _fail(f"--replication-factor must be at least 1, not {replication_factor}")
    _run(create_topic(bootstrap, name, partitions, _pairs(config, "--config"), if_not_exists, replication_factor))
    console.print(f"created topic {name}", highlight=False)


@topics_app.command("list")
def topics_list(
    internal: bool = typer.Option(False, "--internal", help="Include internal topics (__consumer_offsets...)."),
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    bootstrap: str = BootstrapOption,
) -> None:
    """List topic names."""
    from streamkit.clients.admin import list_topics

    for name in _run(list_topics(bootstrap, internal)):
        console.print(name, highlight=False)


@topics_app.command("describe")
def topics_describe(
    name: str = typer.Argument(..., metavar="NAME", help="Topic name."),
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    bootstrap: str = BootstrapOption,
) -> None:
    """Show a topic's partitions, offsets and configs.

    Each partition's earliest and latest offset; the configs set on the topic itself are
    marked "(override)"."""
    from streamkit.clients.admin import describe_topic

    d = _run(describe_topic(bootstrap, name, offsets=True))
    console.print(f"topic {d.name}: {d.partitions} partitions{' (internal)' if d.internal else ''}",
                  highlight=False)
    table = Table()
    for col in ("partition", "leader", "replicas", "isr", "earliest offset", "latest offset", "records"):
        table.add_column(col, justify="right")
    held = {r.partition: r for r in d.replicas}
    for r in d.offsets:
        h = held.get(r.partition)
        leader = "-" if h is None or h.leader < 0 else str(h.leader)
        replicas = ",".join(map(str, h.replicas)) if h else "-"
        isr = ",".join(map(str, h.isr)) if h else "-"
        if h is not None and h.offline:
            replicas += f" ({','.join(map(str, h.offline))} offline)"
        table.add_row(str(r.partition), leader, replicas, isr, str(r.earliest), str(r.latest),
                      str(r.latest - r.earliest))
    console.print(table)
    for key, value in sorted(d.configs.items()):
        mark = "  (override)" if key in d.overrides else ""
        console.print(f"  {key}={value}{mark}", highlight=False, markup=False)


@topics_app.command("delete")
def topics_delete(
    name: str = typer.Argument(..., metavar="NAME", help="Topic name."),
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    bootstrap: str = BootstrapOption,
) -> None:
    """Delete a topic and its data."""
    from streamkit.clients.admin import delete_topic

    _run(delete_topic(bootstrap, name))
    console.print(f"deleted topic {name}", highlight=False)


@topics_app.command("alter-config")
def topics_alter_config(
    name: str = typer.Argument(..., metavar="NAME", help="Topic name."),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE",
                                   help="key=value to set (Kafka's names); repeatable."),
    delete: list[str] = typer.Option([], "--delete", metavar="KEY",
                                     help="A key to reset to the broker's default; repeatable."),
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    bootstrap: str = BootstrapOption,
) -> None:
    """Set or remove a topic's config overrides.

    The overrides not named are kept."""
    from streamkit.clients.admin import alter_topic_config

    if not set_ and not delete:
        raise _fail("nothing to change: give --set key=value or --delete key")
    _run(alter_topic_config(bootstrap, name, _pairs(set_, "--set"), delete))
    console.print(f"altered configs of {name}", highlight=False)


_ACL_OPTION_HELP = {
    "allow_principal": "Principal to allow, e.g. User:alice (User:* for everyone); repeatable.",
    "deny_principal": "Principal to deny; repeatable.",
    "operation": "Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                 "AlterConfigs, IdempotentWrite or All (the default); repeatable.",
}


def _acl_options(allow_principal: list[str], deny_principal: list[str], allow_host: list[str],
                 deny_host: list[str], operation: list[str], topic: str | None, group: str | None,
                 transactional_id: str | None, cluster: bool, pattern_type: str, producer: bool = False,
                 consumer: bool = False, principal: str | None = None) -> Any:
    from streamkit.clients.acls import AclOptions

    return AclOptions(allow_principal, deny_principal, allow_host, deny_host, operation, topic, group,
                      transactional_id, cluster, pattern_type, producer, consumer, principal)


def _print_acls(found: list[Any]) -> None:
    for b in found:
        console.print(f"{b.resource_type.name}:{b.pattern_type.name}:{b.resource_name}  {b.principal} "
                      f"{b.permission.name} {b.operation.name} from host {b.host}", highlight=False, markup=False)


_AllowPrincipal = typer.Option([], "--allow-principal", metavar="PRINCIPAL", help=_ACL_OPTION_HELP["allow_principal"])
_DenyPrincipal = typer.Option([], "--deny-principal", metavar="PRINCIPAL", help=_ACL_OPTION_HELP["deny_principal"])
_AllowHost = typer.Option([], "--allow-host", metavar="HOST", help="Host the allowed principals connect from "
                                                                   "(default: *); repeatable.")
_DenyHost = typer.Option([], "--deny-host", metavar="HOST", help="Host the denied principals connect from "
                                                                 "(default: *); repeatable.")
_Operation = typer.Option([], "--operation", metavar="OP", help=_ACL_OPTION_HELP["operation"])
_Topic = typer.Option(None, "--topic", metavar="NAME", help="A topic (* for all).")
_Group = typer.Option(None, "--group", metavar="NAME", help="A consumer group (* for all).")
_TxnId = typer.Option(None, "--transactional-id", metavar="ID", help="A transactional id (* for all).")
_Cluster = typer.Option(False, "--cluster", help="The cluster resource.")


@acls_app.command("add")
def acls_add(
    allow_principal: list[str] = _AllowPrincipal, deny_principal: list[str] = _DenyPrincipal,
    allow_host: list[str] = _AllowHost, deny_host: list[str] = _DenyHost, operation: list[str] = _Operation,
    topic: str | None = _Topic, group: str | None = _Group, transactional_id: str | None = _TxnId,
    cluster: bool = _Cluster,
    pattern_type: str = typer.Option("literal", "--resource-pattern-type", metavar="TYPE",
                                     help="literal or prefixed."),
    producer: bool = typer.Option(False, "--producer", help="What a producer needs: Write, Describe and "
                                  "Create on the topic (with --transactional-id, Write and Describe on it)."),
    consumer: bool = typer.Option(False, "--consumer", help="What a consumer needs: Read and Describe on the "
                                  "topic, Read on the group."),
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    bootstrap: str = BootstrapOption,
) -> None:
    """Add ACLs: each principal, host and operation on the resource given."""
    from streamkit.clients.acls import bindings, create_acls
    from streamkit.clients.errors import ClientError

    try:
        wanted = bindings(_acl_options(allow_principal, deny_principal, allow_host, deny_host, operation, topic,
                                       group, transactional_id, cluster, pattern_type, producer, consumer))
    except ClientError as exc:
        raise _fail(str(exc)) from None
    _run(create_acls(bootstrap, wanted))
    console.print(f"added {len(wanted)} ACL(s):", highlight=False)
    _print_acls(wanted)


@acls_app.command("list")
def acls_list(
    topic: str | None = _Topic, group: str | None = _Group, transactional_id: str | None = _TxnId,
    cluster: bool = _Cluster,
    principal: str | None = typer.Option(None, "--principal", metavar="PRINCIPAL",
                                         help="Only the ACLs of this principal."),
    pattern_type: str = typer.Option("any", "--resource-pattern-type", metavar="TYPE",
                                     help="literal, prefixed, any, or match (every ACL that applies to the "
                                          "resource, wildcard and prefixes included)."),
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    bootstrap: str = BootstrapOption,
) -> None:
    """List ACLs (all of them, or a resource's)."""
    from streamkit.clients.acls import describe_acls, filters
    from streamkit.clients.errors import ClientError

    try:
        selected = filters(_acl_options([], [], [], [], [], topic, group, transactional_id, cluster, pattern_type,
                                        principal=principal))
    except ClientError as exc:
        raise _fail(str(exc)) from None
    _print_acls(_run(describe_acls(bootstrap, selected)))


@acls_app.command("remove")
def acls_remove(
    allow_principal: list[str] = _AllowPrincipal, deny_principal: list[str] = _DenyPrincipal,
    operation: list[str] = _Operation,
    topic: str | None = _Topic, group: str | None = _Group, transactional_id: str | None = _TxnId,
    cluster: bool = _Cluster,
    pattern_type: str = typer.Option("literal", "--resource-pattern-type", metavar="TYPE",
                                     help="literal, prefixed, any or match."),
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    bootstrap: str = BootstrapOption,
) -> None:
    """Remove a resource's ACLs (all, or those named)."""
    from streamkit.clients.acls import delete_acls, filters
    from streamkit.clients.errors import ClientError

    if not (topic or group or transactional_id or cluster):
        raise _fail("name a resource: --topic, --group, --transactional-id or --cluster")
    try:
        selected = filters(_acl_options(allow_principal, deny_principal, [], [], operation, topic, group,
                                        transactional_id, cluster, pattern_type))
    except ClientError as exc:
        raise _fail(str(exc)) from None
    removed = _run(delete_acls(bootstrap, selected))
    console.print(f"removed {len(removed)} ACL(s)", highlight=False)
    _print_acls(removed)


def _separator(text: str | None) -> str | None:
    """'\\t' as typed in a shell means a tab."""
    if text is None or "\\" not in text:
        return text
    return text.encode().decode("unicode_escape")


@app.command()
def cluster(
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    bootstrap: str = BootstrapOption,
) -> None:
    """Show brokers, controller, partitions short of replicas.

    Lists the brokers with the controller, and the partitions under-replicated (fewer
    in-sync replicas than replicas) or offline (no live leader). Works against Apache Kafka
    too (from Metadata)."""
    from streamkit.clients.admin import describe_cluster

    d = _run(describe_cluster(bootstrap))
    console.print(f"cluster {d.cluster_id or '-'}: {len(d.brokers)} broker(s), controller {d.controller}",
                  highlight=False)
    table = Table()
    for col in ("broker", "host", "port", "rack", "role"):
        table.add_column(col)
    for broker_id, host, port, rack in d.brokers:
        table.add_row(str(broker_id), host, str(port), rack or "-", "controller" if broker_id == d.controller else "")
    console.print(table)
    for label, partitions in (("under-replicated", d.under_replicated), ("offline", d.offline)):
        shown = ", ".join(f"{t}-{p}" for t, p in partitions[:20]) + (", ..." if len(partitions) > 20 else "")
        console.print(f"{label} partitions: {len(partitions)}{': ' + shown if partitions else ''}",
                      highlight=False, markup=False)


@app.command()
def produce(
    topic: str = typer.Argument(..., metavar="TOPIC",
                                help="Topic to write to (created with the broker's defaults if missing)."),
    key_separator: str | None = typer.Option(
        None, "--key-separator", metavar="SEP",
        help="Split each line into KEY and VALUE at the first SEP (e.g. ':' or '\\t')."),
    timestamp: int | None = typer.Option(
        None, "--timestamp", metavar="MS", show_default="the producer's clock",
        help="Timestamp of every record, epoch milliseconds."),
    timestamp_separator: str | None = typer.Option(
        None, "--timestamp-separator", metavar="SEP",
        help="Each line starts with its own timestamp (epoch ms) and this separator: TS<SEP>[KEY<SEP>]VALUE."),
    partition: int | None = typer.Option(None, "--partition", metavar="P",
                                         show_default="by key (murmur2), else spread",
                                         help="Write every record to this partition."),
    acks: str = typer.Option("all", "--acks", metavar="ACKS", help="0, 1 or all."),
    compression: str | None = typer.Option(None, "--compression", metavar="CODEC",
                                           help="gzip, snappy, lz4 or zstd."),
    value_format: str | None = typer.Option(
        None, "--value-format", metavar="FORMAT", show_default="the line as it is",
        help="avro, json-schema or protobuf: each value is a JSON document, encoded with --value-schema in the "
             "Schema Registry's wire format."),
    value_schema: Path | None = typer.Option(None, "--value-schema", metavar="FILE",
                                             help="With --value-format: the schema, registered as TOPIC-value."),
    schema_registry: str = typer.Option("http://127.0.0.1:8081", "--schema-registry", metavar="URL",
                                        envvar="STREAMKIT_SCHEMA_REGISTRY_URL",
                                        help="With --value-format: the Schema Registry."),
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    bootstrap: str = BootstrapOption,
) -> None:
    """Produce one record per line of standard input.

    A bad line stops the input there; the error says which lines were written."""
    from streamkit.clients.console import LineFormat, produce_lines, stdin_lines

    if acks not in ("0", "1", "all", "-1"):
        raise _fail("--acks must be 0, 1 or all")
    if compression not in (None, "gzip", "snappy", "lz4", "zstd"):
        raise _fail(f"--compression must be gzip, snappy, lz4 or zstd, not {compression!r}")
    if timestamp is not None and timestamp_separator is not None:
        raise _fail("give --timestamp or --timestamp-separator, not both")
    fmt = LineFormat(_separator(key_separator), _separator(timestamp_separator), timestamp)
    encode = None
    if value_format is not None:
        encode = _value_encoder(schema_registry, topic, value_format, value_schema)
    sent = _run(produce_lines(bootstrap, topic, stdin_lines(), fmt, partition,
                              "all" if acks == "-1" else acks, compression, encode))
    err.print(f"produced {sent} records to {topic}", highlight=False)


def _value_encoder(url: str, topic: str, value_format: str, schema_file: Path | None) -> Any:
    from streamkit.schemas.client import RegistryClientError
    from streamkit.schemas.console_formats import VALUE_FORMATS, value_encoder

    if value_format not in VALUE_FORMATS:
        raise _fail(f"--value-format must be avro, json-schema or protobuf, not {value_format!r}")
    if schema_file is None:
        raise _fail("--value-format needs --value-schema FILE")
    try:
        return value_encoder(url, topic, value_format, schema_file.read_text())
    except OSError as exc:
        raise _fail(f"cannot read {schema_file}: {exc.strerror}") from None
    except RegistryClientError as exc:
        raise _fail(str(exc)) from None


@app.command()
def consume(
    topic: str = typer.Argument(..., metavar="TOPIC",
                                help="Topic to read (it must exist: reading never creates it)."),
    group: str | None = typer.Option(None, "--group", "-g", metavar="GROUP",
                                     help="Consume as a member of this group (offsets committed at exit)."),
    from_beginning: bool = typer.Option(False, "--from-beginning",
                                        help="Start at the earliest offset when the group has none committed."),
    partition: int | None = typer.Option(None, "--partition", metavar="P",
                                         help="Read only this partition (no group assignment)."),
    offset: int | None = typer.Option(None, "--offset", metavar="OFFSET",
                                      help="With --partition: start at this offset."),
    max_messages: int | None = typer.Option(None, "--max-messages", metavar="N", min=1, show_default="no limit",
                                            help="Stop after this many records."),
    timeout_ms: int | None = typer.Option(None, "--timeout-ms", metavar="MS", show_default="wait forever",
                                          help="Stop after this long without records."),
    print_key: bool = typer.Option(False, "--print-key", help="Print KEY<SEP>VALUE."),
    print_timestamp: bool = typer.Option(False, "--print-timestamp",
                                         help="Print CreateTime:MS<SEP> before each record."),
    key_separator: str = typer.Option("\t", "--key-separator", metavar="SEP", show_default="tab",
                                      help="Separator for --print-key."),
    value_format: str | None = typer.Option(
        None, "--value-format", metavar="FORMAT", show_default="the value as text",
        help="avro, json-schema or protobuf: decode values in the Schema Registry's wire format, print JSON."),
    schema_registry: str = typer.Option("http://127.0.0.1:8081", "--schema-registry", metavar="URL",
                                        envvar="STREAMKIT_SCHEMA_REGISTRY_URL",
                                        help="With --value-format: the Schema Registry."),
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    bootstrap: str = BootstrapOption,
) -> None:
    """Print a topic's records, one value per line."""
    from streamkit.clients.console import consume_lines

    if offset is not None and partition is None:
        raise _fail("--offset needs --partition")
    separator = _separator(key_separator) or ""
    decode = None
    if value_format is not None:
        from streamkit.schemas.console_formats import VALUE_FORMATS, value_decoder

        if value_format not in VALUE_FORMATS:
            raise _fail(f"--value-format must be avro, json-schema or protobuf, not {value_format!r}")
        decode = value_decoder(schema_registry)
    _run(consume_lines(bootstrap, topic, group, from_beginning, partition, offset, max_messages,
                       timeout_ms, lambda line: print(line, flush=True), print_key, separator,
                       notice=lambda text: print(text, file=sys.stderr, flush=True),
                       print_timestamp=print_timestamp, decode_value=decode))


@groups_app.command("list")
def groups_list(
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    bootstrap: str = BootstrapOption,
) -> None:
    """List groups with their protocol type and group type.

    The group type is classic, consumer (KIP-848) or share (KIP-932)."""
    from streamkit.clients.admin import list_groups
    from streamkit.clients.consumer_groups import describe_modern_groups

    groups = _run(list_groups(bootstrap))
    modern = _run(describe_modern_groups(bootstrap, [g for g, p in groups if p != "share"]))
    table = Table()
    for col in ("group", "protocol type", "group type"):
        table.add_column(col, no_wrap=True)
    for group, protocol in groups:
        # The group type: "share" (KIP-932), "consumer" (KIP-848) or "classic" (JoinGroup/SyncGroup).
        kind = "share" if protocol == "share" else "consumer" if modern.get(group) is not None else "classic"
        table.add_row(group, protocol, kind)
    console.print(table)


@groups_app.command("describe")
def groups_describe(
    group: str = typer.Argument(..., metavar="GROUP", help="Group id."),
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    bootstrap: str = BootstrapOption,
) -> None:
    """Show a group's state, members, offsets and lag.

    For a consumer group: its committed offsets and lag. For a share group: each
    partition's share start offset and the records not yet delivered and settled."""
    from streamkit.clients.admin import describe_group
    from streamkit.clients.consumer_groups import describe_modern_groups
    from streamkit.clients.share import describe_share_group

    shared = _run(describe_share_group(bootstrap, group))
    if shared is not None:
        _print_share_group(group, shared)
        return
    modern = _run(describe_modern_groups(bootstrap, [group]))[group]
    state, members, lags = _run(describe_group(bootstrap, group, must_exist=modern is None))
    if modern is not None:
        state, count = modern.state, len(modern.members)
    else:
        count = len(members)
    console.print(f"group {group}: {state}, {count} members", highlight=False)
    if modern is None:
        console.print("protocol: classic", highlight=False)
        for m in members:
            parts = ", ".join(f"{tp.topic}-{tp.partition}" for tp in m.assignment)
            console.print(f"  {m.member_id} ({m.client_id}@{m.host}): {parts}", highlight=False, markup=False)
    else:
        console.print(f"protocol: consumer, group epoch {modern.group_epoch}, assignment epoch "
                      f"{modern.assignment_epoch}, assignor {modern.assignor}", highlight=False)
        for mm in modern.members:
            parts = ", ".join(f"{t}-{p}" for t, p in mm.assignment)
            pending = "" if mm.assignment == mm.target_assignment else (
                " (target: " + ", ".join(f"{t}-{p}" for t, p in mm.target_assignment) + ")")
            static = f" instance {mm.instance_id}" if mm.instance_id else ""
            console.print(f"  {mm.member_id} ({mm.client_id}@{mm.client_host}){static} epoch {mm.member_epoch}: "
                          f"{parts}{pending}", highlight=False, markup=False)
    table = Table()
    for col in ("topic", "partition", "committed", "end offset", "lag"):
        table.add_column(col)
    for lag in lags:
        table.add_row(lag.topic, str(lag.partition), str(lag.committed), str(lag.end_offset), str(lag.lag))
    console.print(table)


def _print_share_group(group: str, shared: Any) -> None:
    console.print(f"share group {group}: {shared.state}, epoch {shared.group_epoch}, "
                  f"{len(shared.members)} members", highlight=False)
    for m in shared.members:
        parts = ", ".join(f"{t}-{p}" for t, p in m.assignment)
        console.print(f"  {m.member_id} ({m.client_id}@{m.host}) epoch {m.member_epoch}: {parts}",
                      highlight=False, markup=False)
    table = Table()
    for col in ("topic", "partition", "start offset", "lag"):
        table.add_column(col)
    for lag in shared.lags:
        table.add_row(lag.topic, str(lag.partition), str(lag.start_offset), str(lag.lag))
    console.print(table)


@groups_app.command("reset-offsets")
def groups_reset_offsets(
    group: str = typer.Argument(..., metavar="GROUP", help="Group id (it must have no active members)."),
    topic: str = typer.Option(..., "--topic", metavar="TOPIC", help="Topic whose offsets to move."),
    partitions: list[int] = typer.Option([], "--partition", metavar="P", show_default="every partition",
                                         help="Only this partition; repeatable."),
    to_earliest: bool = typer.Option(False, "--to-earliest", help="To each partition's earliest offset."),
    to_latest: bool = typer.Option(False, "--to-latest", help="To each partition's end (skip everything)."),
    to_offset: int | None = typer.Option(None, "--to-offset", metavar="N",
                                         help="To this offset (refused outside a partition's earliest..latest)."),
    to_timestamp: int | None = typer.Option(
        None, "--to-timestamp", metavar="MS",
        help="To the first record at or after this time, epoch ms (the end if there is none)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only show the new offsets (the default)."),
    execute: bool = typer.Option(False, "--execute", help="Commit the new offsets."),
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    bootstrap: str = BootstrapOption,
) -> None:
    """Move a group's committed offsets.

    As kafka-consumer-groups.sh --reset-offsets: the plan is printed (a dry run), and
    committed only with --execute."""
    from streamkit.clients.admin import reset_offsets

    chosen = [(name, value) for name, on, value in (
        ("earliest", to_earliest, None), ("latest", to_latest, None),
        ("offset", to_offset is not None, to_offset), ("timestamp", to_timestamp is not None, to_timestamp)) if on]
    if len(chosen) != 1:
        raise _fail("give exactly one of --to-earliest, --to-latest, --to-offset N, --to-timestamp MS")
    if dry_run and execute:
        raise _fail("give --dry-run or --execute, not both")
    (to, value), = chosen
    rows = _run(reset_offsets(bootstrap, group, topic, to, value, execute, partitions or None))
    table = Table()
    for col in ("topic", "partition", "current offset", "new offset", "earliest", "latest"):
        table.add_column(col)
    for r in rows:
        table.add_row(r.topic, str(r.partition), "-" if r.current < 0 else str(r.current), str(r.new),
                      str(r.earliest), str(r.latest))
    console.print(table)
    if execute:
        err.print(f"committed new offsets of group {group} for {len(rows)} partition(s)", highlight=False)
    else:
        err.print("dry run: nothing was changed; add --execute to commit these offsets", highlight=False)


@app.command()
def worker(
    app_path: str = typer.Option(..., "--app", "-A", metavar="MODULE:APP",
                                 help="The app: package.module:app (or package.module), importable from "
                                      "the working directory."),
    broker: str | None = typer.Option(None, "--broker", "-b", metavar="HOST:PORT",
                                      show_default="an embedded broker",
                                      help="Kafka bootstrap host:port of an existing broker."),
    broker_port: int = typer.Option(0, "--broker-port", metavar="PORT", show_default="0: any free port",
                                    help="Port of the embedded broker (without --broker); printed at start."),
    data_dir: Path | None = typer.Option(
        None, "--data-dir", metavar="DIR", show_default="./data/{application.id}",
        help="State stores (locked while the worker runs) and the embedded broker's data."),
    web_port: int | None = typer.Option(None, "--web-port", metavar="PORT", show_default="web.port, else none",
                                        help="Serve /health, /metrics and /tables on this port (0: any)."),
    overrides: list[str] = typer.Option(
        [], "--set", metavar="KEY=VALUE", help="Override an app setting: key=value with Kafka Streams' names "
                          "(e.g. deserialization.exception.handler=dead_letter); repeatable."),
    loglevel: str = typer.Option("info", "--loglevel", "-l", metavar="LEVEL",
                                 help="debug, info, warning or error."),
) -> None:
    """Run a stream app's agents, tables and pipelines.

    The worker is one member of the app's consumer group; start more to share the work."""
    import logging

    from streamkit.dirlock import DataDirectoryError
    from streamkit.streams.dsl import CoPartitionError
    from streamkit.streams.runtime import StartupError
    from streamkit.streams.settings import SettingsError
    from streamkit.streams.worker import AppLoadError, WorkerStartError, run_worker

    if broker is not None and broker_port:
        raise _fail("--broker-port is the embedded broker's port: give it or --broker, not both")
    _setup_logging(loglevel)
    if loglevel.lower() != "debug":
        logging.getLogger("aiokafka").setLevel(logging.ERROR)
    settings = _pairs(overrides, "--set")
    try:
        code = run_worker(app_path, broker, data_dir, web_port, settings, broker_port)
    except (AppLoadError, SettingsError, StartupError, CoPartitionError, DataDirectoryError,
            WorkerStartError) as exc:
        raise _fail(str(exc)) from None
    except KeyboardInterrupt:
        code = 0
    raise typer.Exit(code)


def _os_error(exc: OSError, bind_context: str) -> str:
    """One line for an OSError: file errors name their file, the others are the bind's."""
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    if exc.filename is not None:
        return f"cannot use {exc.filename}: {reason}"
    return f"{bind_context}: {reason}"


@app.command("console")
def console_command(
    bootstrap: str = typer.Option(..., "--bootstrap-servers", "--bootstrap-server", "-b", metavar="HOST:PORT",
                                  help="Kafka bootstrap.servers of the cluster to show."),
    connect_url: str | None = typer.Option(None, "--connect-url", metavar="URL",
                                           help="A Kafka Connect REST API (http://HOST:8083)."),
    schema_registry_url: str | None = typer.Option(None, "--schema-registry-url", metavar="URL",
                                                   help="A Schema Registry (http://HOST:8081): the schema pages, "
                                                        "and Avro / JSON Schema records decoded."),
    app_urls: list[str] = typer.Option([], "--app-url", metavar="URL",
                                       help="A stream worker's web port (http://HOST:PORT); repeatable."),
    listen: str = typer.Option("127.0.0.1:8088", "--listen", metavar="HOST:PORT",
                               help="Where the console serves its pages (port 0: any free port)."),
    ssl_keystore: Path | None = typer.Option(
        None, "--ssl-keystore-location", metavar="FILE",
        help="Serve over https with this PEM file (private key and certificate chain, as ssl.keystore.location)."),
    users_file: Path | None = typer.Option(
        None, "--basic-auth-users", metavar="FILE",
        help="Ask for HTTP basic authentication with the users of this file ('user: password' lines, "
             "Kafka Connect's PropertyFileLoginModule format)."),
    http_user_info: str | None = typer.Option(
        None, "--http-user-info", metavar="USER:PASSWORD", envvar="STREAMKIT_HTTP_USER_INFO",
        help="Basic auth credentials of the Connect REST API, the workers' web endpoints and the registry."),
    http_ca: Path | None = typer.Option(
        None, "--http-ca-location", metavar="FILE",
        help="PEM file of the CAs that signed the certificates of the Connect REST API, the workers and the "
             "registry (https)."),
    port: int | None = typer.Option(None, "--port", metavar="P", help="The port of --listen alone."),
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
) -> None:
    """Serve the web console.

    Topics, messages, consumer groups, Connect, stream apps and schemas, in a browser."""
    from streamkit.clients.errors import ClientError
    from streamkit.clients.security import command_client_config
    from streamkit.console import ConsoleSettings
    from streamkit.console.server import serve
    from streamkit.http import HttpSecurity, HttpSecurityError, read_credentials

    host, sep, port_text = listen.rpartition(":")
    if not sep or not port_text.isdigit() or not host:
        raise _fail(f"--listen expects HOST:PORT, got {listen!r}")
    if port is not None:
        if not 0 <= port <= 65535:
            raise _fail(f"--port must be 0..65535, not {port}")
        port_text = str(port)
    settings = ConsoleSettings(bootstrap, connect_url, tuple(app_urls), schema_registry_url,
                               command_client_config(), http_user_info, str(http_ca) if http_ca else None)
    try:
        settings.security()  # a bad setting is one line now, not an error on every page
        settings.http_options()
        security = HttpSecurity(ssl_keystore, None, read_credentials(users_file) if users_file else {}, "streamkit console")
    except (ClientError, HttpSecurityError) as exc:
        raise _fail(str(exc)) from None

    def announce(url: str) -> None:
        console.print(f"console listening on {url}", highlight=False, soft_wrap=True)
        sys.stdout.flush()

    try:
        asyncio.run(serve(settings, host.strip("[]"), int(port_text), announce, security))
    except OSError as exc:
        raise _fail(str(exc)) from None
    except KeyboardInterrupt:
        pass


connect_app = _typer(help="Run Kafka Connect workers (JSON configs, REST API).")
app.add_typer(connect_app, name="connect")


@connect_app.command("standalone")
def connect_standalone(
    worker_config: Path = typer.Argument(..., metavar="WORKER_CONFIG",
                                         help="worker.json (or .properties) with Kafka Connect's worker keys."),
    connector_configs: list[Path] = typer.Argument(None, metavar="CONNECTOR_CONFIG",
                                                   help='Connector configs: {"name": ..., "config": {...}}.'),
    ready_file: Path | None = typer.Option(None, "--ready-file", metavar="FILE",
                                           help="Write the REST port here once serving."),
    loglevel: str = typer.Option("info", "--loglevel", "-l", metavar="LEVEL",
                                 help="debug, info, warning or error."),
) -> None:
    """Run one Connect worker, with its offsets in a local file.

    As Kafka's connect-standalone."""
    from streamkit.clients.errors import ClientError
    from streamkit.connect.errors import ConfigError
    from streamkit.connect.standalone import run_standalone

    _connect_logging(loglevel)
    for path in [worker_config, *(connector_configs or [])]:
        if not path.is_file():
            raise _fail(f"{path} does not exist")
    try:
        run_standalone(worker_config, connector_configs or [], ready_file)
    except (ConfigError, ClientError) as exc:
        raise _fail(str(exc)) from None
    except OSError as exc:
        raise _fail(f"cannot start the Connect worker: {exc.strerror or exc}") from None


@connect_app.command("distributed")
def connect_distributed(
    worker_config: Path = typer.Argument(..., metavar="WORKER_CONFIG",
                                         help="worker.json with group.id and the *.storage.topic keys."),
    ready_file: Path | None = typer.Option(None, "--ready-file", metavar="FILE",
                                           help="Write the REST port here once serving."),
    loglevel: str = typer.Option("info", "--loglevel", "-l", metavar="LEVEL",
                                 help="debug, info, warning or error."),
) -> None:
    """Run one worker of a Connect cluster.

    Configs, offsets and status live in compacted topics, as with Kafka's
    connect-distributed."""
    from streamkit.clients.errors import ClientError
    from streamkit.connect.distributed_worker import run_distributed
    from streamkit.connect.errors import ConfigError

    _connect_logging(loglevel)
    if not worker_config.is_file():
        raise _fail(f"{worker_config} does not exist")
    try:
        run_distributed(worker_config, ready_file)
    except (ConfigError, ClientError) as exc:
        raise _fail(str(exc)) from None
    except OSError as exc:
        raise _fail(f"cannot start the Connect worker: {exc.strerror or exc}") from None


@app.command("schema-registry")
def schema_registry(
    config_file: Path | None = typer.Option(None, "--config", metavar="FILE",
                                            help="A schema-registry.properties file (Confluent's names)."),
    overrides: list[str] = typer.Option([], "--set", metavar="KEY=VALUE",
                                        help="Override a setting: listeners, kafkastore.bootstrap.servers, "
                                             "kafkastore.topic, schema.compatibility.level, ...; repeatable."),
    ready_file: Path | None = typer.Option(None, "--ready-file", metavar="FILE",
                                           help="Write the bound port here once serving."),
    loglevel: str = typer.Option("info", "--loglevel", metavar="LEVEL", help="debug, info, warning or error."),
) -> None:
    """Run a Confluent-compatible Schema Registry. Avro, JSON Schema and Protobuf, stored on a broker."""
    from streamkit.broker.config import read_properties
    from streamkit.log.errors import ConfigError
    from streamkit.schemas import RegistryConfig, RegistryConfigError, run_schema_registry

    _setup_logging(loglevel)
    try:
        settings = read_properties(config_file) if config_file else {}
        settings.update(_pairs(overrides, "--set"))
        config = RegistryConfig.from_settings(settings)
    except (RegistryConfigError, ConfigError) as exc:
        raise _fail(str(exc)) from None
    try:
        run_schema_registry(config, ready_file)
    except OSError as exc:
        raise _fail(str(exc)) from None


schemas_app = _typer(help="List, read, register and check registry schemas.")
app.add_typer(schemas_app, name="schemas")
RegistryOption = typer.Option(
    "http://127.0.0.1:8081", "--schema-registry", "-r", metavar="URL", envvar="STREAMKIT_SCHEMA_REGISTRY_URL",
    help="The Schema Registry (streamkit's or Confluent's).")


def _registry_call(url: str, call: Any) -> Any:
    from streamkit.clients.security import command_settings
    from streamkit.schemas.client import RegistryClient, RegistryClientError

    try:
        # a registry over https with basic auth: -X basic.auth.user.info=USER:PASSWORD,
        # -X schema.registry.ssl.ca.location=FILE (Confluent's names), or --command-config
        with RegistryClient(url, settings=command_settings()) as client:
            return call(client)
    except RegistryClientError as exc:
        raise _fail(str(exc)) from None


def _schema_file(path: Path, schema_type: str | None) -> tuple[str, str]:
    """The schema's text and type (given, else by the file's suffix)."""
    from streamkit.schemas.client import RegistryClientError, schema_type_of

    try:
        return path.read_text(), schema_type_of(path, schema_type)
    except OSError as exc:
        raise _fail(f"cannot read {path}: {exc.strerror}") from None
    except RegistryClientError as exc:
        raise _fail(str(exc)) from None


@schemas_app.command("list")
def schemas_list(
    prefix: str = typer.Option("", "--prefix", metavar="PREFIX", help="Only subjects starting with this."),
    deleted: bool = typer.Option(False, "--deleted", help="Include soft-deleted subjects."),
    registry: str = RegistryOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
) -> None:
    """Subjects with their latest version, schema id and type."""
    def rows(client: Any) -> list[list[str]]:
        out = []
        for subject in client.subjects(deleted, prefix):
            try:
                latest = client.version(subject)
                out.append([subject, str(latest.version), str(latest.id), latest.schema_type])
            except Exception:  # a subject whose versions are all soft-deleted has no latest
                out.append([subject, "-", "-", "deleted"])
        return out

    table = Table("SUBJECT", "VERSION", "ID", "TYPE", box=None)
    for row in _registry_call(registry, rows):
        table.add_row(*row)
    console.print(table)


@schemas_app.command("get")
def schemas_get(
    subject: str | None = typer.Argument(None, metavar="SUBJECT", help="The subject (or give --id)."),
    version: str = typer.Option("latest", "--version", metavar="V", help="A version number or latest."),
    schema_id: int | None = typer.Option(None, "--id", metavar="ID", help="A schema by its id instead."),
    registry: str = RegistryOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
) -> None:
    """Print a subject's version, or the schema with an id. JSON schemas are indented."""
    import contextlib
    import json

    if (subject is None) == (schema_id is None):
        raise _fail("give a SUBJECT or --id, one of them")
    if schema_id is not None:
        kind, text = _registry_call(registry, lambda client: client.by_id(schema_id))
    else:
        assert subject is not None
        found = _registry_call(registry, lambda client: client.version(subject, version))
        kind, text = found.schema_type, found.schema
        err.print(f"{found.subject} version {found.version}, id {found.id}, {kind}", highlight=False)
    if kind != "PROTOBUF":
        with contextlib.suppress(ValueError):
            text = json.dumps(json.loads(text), indent=2)
    console.print(text, highlight=False, markup=False, soft_wrap=True)


@schemas_app.command("register")
def schemas_register(
    subject: str = typer.Argument(..., metavar="SUBJECT", help="e.g. TOPIC-value"),
    path: Path = typer.Argument(..., metavar="FILE", help="The schema: .avsc, .json or .proto."),
    schema_type: str | None = typer.Option(None, "--type", metavar="TYPE", show_default="by the file's suffix",
                                           help="avro, json or protobuf."),
    registry: str = RegistryOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
) -> None:
    """Register FILE under SUBJECT and print its id. It is checked against the subject's compatibility level first."""
    text, kind = _schema_file(path, schema_type)
    schema_id = _registry_call(registry, lambda client: client.register(subject, text, kind))
    console.print(schema_id)


@schemas_app.command("check")
def schemas_check(
    subject: str = typer.Argument(..., metavar="SUBJECT", help="The subject to check against."),
    path: Path = typer.Argument(..., metavar="FILE", help="The schema: .avsc, .json or .proto."),
    schema_type: str | None = typer.Option(None, "--type", metavar="TYPE", show_default="by the file's suffix",
                                           help="avro, json or protobuf."),
    version: str = typer.Option("latest", "--version", metavar="V", help="Check against this version."),
    registry: str = RegistryOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
) -> None:
    """Check that FILE may be registered under SUBJECT. Exit 0 if compatible, 1 with the reasons if not."""
    text, kind = _schema_file(path, schema_type)
    problems = _registry_call(registry, lambda client: client.check(subject, text, kind, version))
    if not problems:
        console.print(f"compatible with {subject} version {version}", highlight=False)
        return
    for problem in problems:
        err.print(problem, highlight=False, markup=False, soft_wrap=True)
    raise typer.Exit(code=1)


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
