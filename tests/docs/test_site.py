"""The documentation site: it builds strictly (no broken link or reference), its reference
pages list what the code defines, and what its pages tell users to type still works: every
Python block compiles, and every `streamkit` command line names commands and options the
CLI has."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

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

_MARKED = re.compile(r"(?:<!-- (?P<mark>fragment|run)\b[^>]*-->\n)?^```(?P<lang>\w*)[^\n]*\n(?P<code>.*?)^```",
                     re.M | re.S)
_ADDRESSES = ("127.0.0.1:9092", "localhost:9092")


def _sessions() -> list[tuple[str, str]]:
    """Per page, its Python blocks not marked as fragments, in order: run as one session."""
    found = []
    for page in GUIDES:
        blocks = [m.group("code") for m in _MARKED.finditer(page.read_text())
                  if m.group("lang") in ("python", "py") and m.group("mark") != "fragment"]
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


def _address(code: str, bootstrap: str) -> str:
    """What a page runs against, moved to the test's own addresses: the broker, and a free
    port for a Connect worker's REST API (a reader's 8083 may be taken here)."""
    from streamkit.testing import free_port

    for address in _ADDRESSES:
        code = code.replace(address, bootstrap)
    return code.replace("127.0.0.1:8083", f"127.0.0.1:{free_port()}")


@pytest.mark.integration
@pytest.mark.parametrize(("page", "code"), [pytest.param(p, c, id=p) for p, c in _sessions()])
def test_every_page_s_python_runs(page: str, code: str, docs_broker: Any, tmp_path: Path) -> None:
    """The page's Python blocks in order, as a reader pastes them (a fresh directory; the
    broker of the page at a test broker's address)."""
    done = subprocess.run([sys.executable, "-c", _address(code, docs_broker.bootstrap)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=180,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, f"{page}:\n{done.stderr[-3000:]}"


@pytest.mark.integration
@pytest.mark.parametrize(("where", "script"), [pytest.param(w, s, id=w) for w, s in _shell_runs()])
def test_every_shell_block_marked_run_runs(where: str, script: str, docs_broker: Any, tmp_path: Path) -> None:
    for tool in ("psql", "mariadb", "curl"):
        if re.search(rf"^\s*(?:until .*)?\b{tool}\b", script, re.M):
            require_service(shutil.which(tool) is not None, f"{tool} (for {where})")
    env = {**os.environ, "STREAMKIT_BOOTSTRAP_SERVER": docs_broker.bootstrap,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    # What the script leaves running in the background (a worker) ends with it, pass or fail.
    script = "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + _address(script, docs_broker.bootstrap)
    try:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        failure = "" if done.returncode == 0 else f"exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    except subprocess.TimeoutExpired as exc:
        failure = f"no end in {exc.timeout} s\n{exc.stdout!r:.2000}\n{exc.stderr!r:.2000}"
    logs = "".join(f"\n--- {p.name}:\n{p.read_text()[-3000:]}" for p in sorted(tmp_path.glob("*.log")))
    assert not failure, f"{where}: {failure}{logs}"
