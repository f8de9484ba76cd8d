"""The documentation site: it builds strictly (no broken link or reference), its reference
pages list what the code defines, and what its pages tell users to type still works: every
Python block compiles, and every `streamkit` command line names commands and options the
CLI has."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from pydantic import BaseModel

from streamkit import docs_reference
from streamkit.broker.config_defs import BROKER_CONFIGS
from streamkit.cli import app
from streamkit.log.config import TOPIC_CONFIGS
from streamkit.streams.settings import setting_names
from tests.conftest import require_service

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
GUIDES = [ROOT / "README.md", *sorted([*DOCS.glob("tutorials/*.md"), *DOCS.glob("how-to/*.md"),
                                       *DOCS.glob("concepts/*.md")])]
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)


def _blocks(language: set[str]) -> list[tuple[str, str]]:
    found = []
    for page in GUIDES:
        for m in _FENCE.finditer(page.read_text()):
            if m.group(1) in language:
                found.append((f"{page.relative_to(ROOT)}:{page.read_text()[:m.start()].count(chr(10)) + 1}", m.group(2)))
    return found


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    for page in docs_reference.PAGES:
        assert (tmp_path / "site" / page.removesuffix(".md") / "index.html").exists(), page
    assert (tmp_path / "site" / "connectors" / "file-source.json").exists()


def test_the_reference_lists_every_setting_the_code_defines() -> None:
    broker, topic, app_page = (docs_reference.broker_settings(), docs_reference.topic_settings(),
                               docs_reference.app_settings())
    assert all(f"| `{d.name}` |" in broker for d in BROKER_CONFIGS)
    assert all(f"| `{d.name}` |" in topic for d in TOPIC_CONFIGS)
    assert all(f"| `{name}` |" in app_page for name in setting_names())
    # Every setting documented: no empty description column.
    assert not [line for line in app_page.splitlines() if line.startswith("| `") and line.endswith("|  |")]


def test_the_cli_reference_has_every_command() -> None:
    page = docs_reference.cli()
    for command in ("broker", "worker", "topics create", "groups reset-offsets", "connect standalone", "cluster"):
        assert f"## `streamkit {command}`" in page or f"### `streamkit {command}`" in page, command


@pytest.mark.parametrize(("where", "code"), [pytest.param(w, c, id=w) for w, c in _blocks({"python", "py"})])
def test_every_python_block_in_the_guides_compiles(where: str, code: str) -> None:
    compile(code, where, "exec")


def _command_lines() -> list[tuple[str, str]]:
    found = []
    for where, block in _blocks({"bash", "sh", "console", "shell", ""}):
        for line in block.splitlines():
            line = line.strip().removeprefix("$ ")
            if line.startswith("streamkit ") and "|" not in line.split("#")[0] and "[" not in line:
                found.append((where, line.split(" #")[0].rstrip(" &\\")))
    return found


def _resolve(words: list[str]) -> tuple[Any, list[str]]:
    command: Any = typer.main.get_command(app)
    rest = list(words)
    while rest and hasattr(command, "get_command"):
        sub = command.get_command(typer.Context(command), rest[0])
        if sub is None:
            break
        command, rest = sub, rest[1:]
    return command, rest


@pytest.mark.parametrize(("where", "line"), [pytest.param(w, line, id=f"{w}:{line}") for w, line in _command_lines()])
def test_every_documented_command_exists_with_its_options(where: str, line: str) -> None:
    words = shlex.split(line)[1:]
    command, rest = _resolve(words)
    assert not hasattr(command, "get_command") or not rest or rest[0].startswith("-"), \
        f"{where}: no command {' '.join(words[:2])!r}"
    known = {o for p in command.params if p.param_type_name == "option" for o in [*p.opts, *p.secondary_opts]}
    for word in rest:
        if word.startswith("-") and word != "-":
            flag = word.split("=", 1)[0]
            assert flag in known, f"{where}: `{line}`: no option {flag} (has {sorted(known)})"


def test_the_systemd_units_in_the_guide_are_the_shipped_ones_and_their_commands_exist() -> None:
    guide = (DOCS / "how-to" / "systemd.md").read_text()
    units = re.findall(r"`deploy/systemd/([\w-]+\.service)`:\n\n```ini\n(.*?)```", guide, re.S)
    assert {name for name, _ in units} == {p.name for p in (ROOT / "deploy" / "systemd").iterdir()}
    for name, text in units:
        assert (ROOT / "deploy" / "systemd" / name).read_text() == text, name
        command = re.search(r"^ExecStart=\S+/streamkit (.*)$", text, re.M)
        assert command is not None, name
        test_every_documented_command_exists_with_its_options(name, "streamkit " + command.group(1))


def test_the_grafana_dashboard_queries_only_metrics_the_code_exports() -> None:
    import json

    dashboard = json.loads((ROOT / "deploy" / "grafana" / "streamkit-dashboard.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    used = {m.removesuffix("_total") for e in exprs for m in re.findall(r"\b((?:streamkit|connect)_[a-z_]+)", e)}
    source = "\n".join(p.read_text() for p in (ROOT / "streamkit").rglob("*.py"))
    assert used and all(f'"{name}"' in source for name in used), sorted(n for n in used if f'"{n}"' not in source)
    prometheus = (ROOT / "deploy" / "prometheus.yml").read_text()
    assert prometheus.split("\n", 1)[1] in (DOCS / "how-to" / "monitoring.md").read_text()


# -- running what the pages show -------------------------------------------------------------

_MARKED = re.compile(r"(?:<!-- (?P<mark>fragment|run|spark)\b[^>]*-->\n)?^```(?P<lang>\w*)[^\n]*\n(?P<code>.*?)^```",
                     re.M | re.S)
_ADDRESSES = ("127.0.0.1:9092", "localhost:9092")
_REGISTRY = "http://127.0.0.1:8081"
# Modules a page imports as a reader would have them: orders_pb2, as protoc generates it.
_GENERATED = Path(__file__).parent / "pb"


def _sessions() -> list[tuple[str, str]]:
    """Per page, its Python blocks not marked as fragments (or to run in the test session's
    SparkSession), in order: run as one session."""
    found = []
    for page in GUIDES:
        blocks = [m.group("code") for m in _MARKED.finditer(page.read_text())
                  if m.group("lang") in ("python", "py") and m.group("mark") not in ("fragment", "spark")]
        if blocks:
            found.append((str(page.relative_to(ROOT)), "\n".join(blocks)))
    return found


def _shell_runs() -> list[tuple[str, str]]:
    """Per page, its shell blocks marked ``<!-- run -->``, in order: run as one script."""
    found = []
    for page in GUIDES:
        blocks = [m.group("code") for m in _MARKED.finditer(page.read_text())
                  if m.group("mark") == "run" and m.group("lang") in ("sh", "bash")]
        if blocks:
            found.append((str(page.relative_to(ROOT)), "\n".join(blocks)))
    return found


@pytest.fixture(scope="module")
def docs_broker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from streamkit.testing import BrokerProcess

    broker = BrokerProcess(tmp_path_factory.mktemp("docs-broker") / "data").start()
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def docs_registry(docs_broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from streamkit.testing import SchemaRegistryProcess

    with SchemaRegistryProcess(docs_broker.bootstrap, tmp_path_factory.mktemp("docs-registry") / "registry.log") as running:
        yield running


def _address(code: str, bootstrap: str, registry: str = _REGISTRY) -> str:
    """What a page runs against, moved to the test's own addresses: the broker, the Schema
    Registry, and a free port for a Connect worker's REST API (a reader's 8083 may be taken here)."""
    from streamkit.testing import free_port

    for address in _ADDRESSES:
        code = code.replace(address, bootstrap)
    return code.replace(_REGISTRY, registry).replace("127.0.0.1:8083", f"127.0.0.1:{free_port()}")


def _registry_for(code: str, request: pytest.FixtureRequest) -> str:
    """The test registry's URL when the code talks to a registry (started only then)."""
    return request.getfixturevalue("docs_registry").url if _REGISTRY in code else _REGISTRY


@pytest.mark.integration
@pytest.mark.parametrize(("page", "code"), [pytest.param(p, c, id=p) for p, c in _sessions()])
def test_every_page_s_python_runs(page: str, code: str, docs_broker: Any, tmp_path: Path,
                                  request: pytest.FixtureRequest) -> None:
    """The page's Python blocks in order, as a reader pastes them (a fresh directory; the
    broker and the Schema Registry of the page at the test's own)."""
    code = _address(code, docs_broker.bootstrap, _registry_for(code, request))
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=180,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(_GENERATED)])})
    assert done.returncode == 0, f"{page}:\n{done.stderr[-3000:]}"


@pytest.mark.integration
@pytest.mark.parametrize(("where", "script"), [pytest.param(w, s, id=w) for w, s in _shell_runs()])
def test_every_shell_block_marked_run_runs(where: str, script: str, docs_broker: Any, tmp_path: Path) -> None:
    for tool in ("psql", "mariadb", "curl", "kcat"):
        if re.search(rf"^\s*(?:until .*)?\b{tool}\b", script, re.M):
            require_service(shutil.which(tool) is not None, f"{tool} (for {where})")
    env = {**os.environ, "STREAMKIT_BOOTSTRAP_SERVER": docs_broker.bootstrap,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    # What the script leaves running in the background (a worker) ends with it, pass or fail.
    # The tutorials run streamkit from a checkout's .venv; here it is this interpreter's, on the PATH.
    script = script.replace(".venv/bin/streamkit", "streamkit")
    script = "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + _address(script, docs_broker.bootstrap)
    # Its own process group: on a timeout the whole group goes, the background worker too
    # (the EXIT trap does not run when bash itself is killed).
    shell = subprocess.Popen(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = shell.communicate(timeout=120)
        failure = "" if shell.returncode == 0 else f"exit {shell.returncode}\n{stdout[-2000:]}\n{stderr[-2000:]}"
    except subprocess.TimeoutExpired:
        os.killpg(shell.pid, signal.SIGKILL)
        stdout, stderr = shell.communicate()
        failure = f"no end in 120 s\n{stdout[-2000:]}\n{stderr[-2000:]}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)
    logs = "".join(f"\n--- {p.name}:\n{p.read_text()[-3000:]}" for p in sorted(tmp_path.glob("*.log")))
    assert not failure, f"{where}: {failure}{logs}"


def test_every_registry_setting_is_documented() -> None:
    from streamkit.schemas.config import SETTINGS, SETTINGS_DOC

    assert set(SETTINGS_DOC) == set(SETTINGS)
    page = docs_reference.registry()
    assert all(f"| `{name}` |" in page for name in SETTINGS)
    assert "| POST | `/subjects/{subject}/versions` |" in page


def test_the_python_reference_has_the_dsl_tables_agents_and_test_helpers() -> None:
    page = docs_reference.python_api()
    for target in ("streamkit.streams.app.App", "streamkit.streams.dsl.StreamNode",
                   "streamkit.streams.dsl.WindowedAggregation", "streamkit.streams.table.Table",
                   "streamkit.streams.agent.AgentStream", "streamkit.testing.driver.AppTestDriver",
                   "streamkit.testing.connect.ConnectorTestDriver", "streamkit.testing.strategies.timestamped_records",
                   "streamkit.connect.connector.SourceConnector"):
        assert f"::: {target}\n" in page, target


def _json_blocks() -> list[tuple[str, str]]:
    """Every JSON block of the README and the guides that is not marked as a fragment."""
    found = []
    for page in GUIDES:
        text = page.read_text()
        for m in _MARKED.finditer(text):
            if m.group("lang") == "json" and m.group("mark") != "fragment":
                found.append((f"{page.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}", m.group("code")))
    return found


@pytest.mark.parametrize(("where", "block"), [pytest.param(w, b, id=w) for w, b in _json_blocks()])
def test_every_json_config_in_the_guides_is_valid(where: str, block: str) -> None:
    """A connector config a page shows passes the worker's validation with no unknown key,
    a worker config loads, as a reader pasting them would find."""
    import json

    from streamkit.connect.config import validate_config
    from streamkit.connect.plugins import PluginRegistry
    from streamkit.connect.worker_config import load_worker_config

    document = json.loads(block)
    config = document.get("config", document)
    if "connector.class" in config:
        # A connector asking for exactly-once needs a worker that supports it.
        worker = {"exactly.once.source.support": "enabled"} if "exactly.once.support" in config else None
        valid = validate_config({"name": document.get("name", "example"), **config}, PluginRegistry(), worker)
        assert not valid.warnings, f"{where}: {valid.warnings}"
    else:
        assert "bootstrap.servers" in config, f"{where}: neither a connector nor a worker config"
        load_worker_config(config)


# -- the Spark and Dask blocks: in the test session's one SparkSession ------------------------

def _spark_blocks() -> list[tuple[str, str]]:
    """Per page, its Python blocks marked ``<!-- spark: ... -->``, in order: run in this
    process, where ``spark`` is the test session's SparkSession (tests/sparkutil.py; a second
    one would start a second JVM)."""
    found = []
    for page in GUIDES:
        blocks = [m.group("code") for m in _MARKED.finditer(page.read_text()) if m.group("mark") == "spark"]
        if blocks:
            found.append((str(page.relative_to(ROOT)), "\n".join(blocks)))
    return found


_PAYMENT = {"type": "record", "name": "Payment", "fields": [
    {"name": "id", "type": "long"}, {"name": "who", "type": "string"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}}]}


class PageView(BaseModel):
    """The Spark guide's page view (at module level: Dask and Spark pickle it by name)."""

    user: str
    page: str


class Order(BaseModel):
    """The Dask guide's order."""

    item: str
    qty: int


@pytest.fixture(scope="module")
def docs_data(docs_broker: Any, docs_registry: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What the Spark and Dask guides read: the topics page_views and orders (JSON), payments
    (Avro through the registry), and an app whose tables views and totals count them."""
    import asyncio
    import decimal
    import json

    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    import streamkit
    import streamkit.dask

    bootstrap = docs_broker.bootstrap
    app = streamkit.App("docs-spark-app", broker=bootstrap, data_dir=tmp_path_factory.mktemp("docs-app"),
                        config={"commit.interval.ms": 100, "num.partitions": 2})
    app.stream(app.topic("page_views", value_type=PageView)).group_by(lambda v: v.page, name="by_page") \
        .count(name="views")
    app.stream(app.topic("orders", value_type=Order)).group_by(lambda o: o.item, name="by_item") \
        .sum(lambda o: o.qty, name="totals")
    serialize = AvroSerializer(SchemaRegistryClient({"url": docs_registry.url}), json.dumps(_PAYMENT))

    async def run() -> None:
        runtime = await app.start()
        try:
            producer = Producer({"bootstrap.servers": bootstrap})
            for i, page in enumerate(["/home", "/home", "/docs"]):
                producer.produce("page_views", key=f"u{i}", value=json.dumps({"user": f"u{i}", "page": page}))
            for item, qty in [("tea", 2), ("tea", 3), ("cake", 1)]:
                producer.produce("orders", key=item, value=json.dumps({"item": item, "qty": qty}))
            for i, (who, amount) in enumerate([("ann", "12.50"), ("bob", "3.20")]):
                value = {"id": i, "who": who, "amount": decimal.Decimal(amount)}
                producer.produce("payments", value=serialize(value, SerializationContext("payments",
                                                                                         MessageField.VALUE)))
            assert producer.flush(30) == 0
            for _ in range(600):
                try:
                    views = await asyncio.to_thread(lambda: streamkit.dask.read_table(app, "views", value_type=int)
                                                    .compute())
                    totals = await asyncio.to_thread(lambda: streamkit.dask.read_table(app, "totals", value_type=int)
                                                     .compute())
                except Exception:  # the changelogs appear with the first commit
                    views = totals = None
                if views is not None and totals is not None and sorted(views["value"]) == [1, 2] \
                        and sorted(totals["value"]) == [1, 5]:
                    return
                await asyncio.sleep(0.1)
            raise AssertionError(f"the app's tables did not fill: {views}, {totals}")
        finally:
            await asyncio.wait_for(runtime.stop(), 60)
        assert runtime.failure is None

    asyncio.run(run())
    return {"app": app, "PageView": PageView, "Order": Order}


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize(("where", "code"), [pytest.param(w, c, id=w) for w, c in _spark_blocks()])
def test_every_spark_and_dask_block_runs(where: str, code: str, docs_broker: Any, docs_registry: Any,
                                         docs_data: dict[str, Any], tmp_path: Path) -> None:
    """The page's blocks as a reader runs them after starting Spark (``spark``), with the app
    and models they name; every DataFrame they leave computes (the reads are lazy), and a
    streaming query they start processes what is there, then stops."""
    import dask.dataframe
    from pyspark.sql import DataFrame

    from tests.sparkutil import spark_session

    spark = spark_session()
    code = _address(code, docs_broker.bootstrap, docs_registry.url).replace("/tmp/ckpt", str(tmp_path / "ckpt"))
    namespace: dict[str, Any] = {"spark": spark, **docs_data}
    try:
        exec(compile(code, where, "exec"), namespace)  # the documented code, run as documented
        for query in spark.streams.active:
            query.processAllAvailable()
    finally:
        for query in spark.streams.active:
            query.stop()
    frames = {name: value for name, value in namespace.items() if isinstance(value, (DataFrame, dask.dataframe.DataFrame))}
    assert frames, where
    for name, frame in frames.items():
        rows = len(frame.collect()) if isinstance(frame, DataFrame) else len(frame.compute())
        assert rows > 0, f"{where}: {name} is empty"
