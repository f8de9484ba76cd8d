"""The README's three-broker cluster on one machine, run as a reader pastes it: ZooKeeper
from Debian's jars, three ``streamkit broker`` processes, a replicated topic, records
written with acks=all, a broker SIGKILLed, the records read back from the others.
docs/how-to/cluster.md shows the same start. The fixed ports of the text (2181,
9090-9092) are moved to free ones, and ``.venv/bin/streamkit`` runs this interpreter's."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from streamkit.testing import BrokerProcess, free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
_MARKED = re.compile(r"<!-- cluster -->\n```sh\n(?P<code>.*?)^```", re.M | re.S)


def _block() -> str:
    [found] = _MARKED.findall((ROOT / "README.md").read_text())
    return str(found)


def _shim(cwd: Path) -> None:
    """``.venv/bin/streamkit`` in ``cwd``, running this interpreter's streamkit."""
    shim = cwd / ".venv" / "bin" / "streamkit"
    shim.parent.mkdir(parents=True)
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m streamkit "$@"\n')
    shim.chmod(0o755)


def _processes(session: int) -> str:
    """What each process the script started was doing when it hung: its state (T for
    stopped, Z for a zombie), the kernel function it waits in, and its sockets."""
    shown = subprocess.run(["ps", "-s", str(session), "-o", "pid,ppid,stat,wchan:24,etime,args"],
                           capture_output=True, text=True).stdout
    sockets = subprocess.run(["ss", "-tanp"], capture_output=True, text=True).stdout
    pids = {line.split()[0] for line in shown.splitlines()[1:]}
    mine = [line for line in sockets.splitlines() if any(f"pid={pid}," in line for pid in pids)]
    return f"\n--- processes:\n{shown}\n--- their sockets:\n" + "\n".join(mine)


def test_the_how_to_starts_the_cluster_as_the_readme_does() -> None:
    how_to = (ROOT / "docs" / "how-to" / "cluster.md").read_text()
    for line in _block().splitlines():
        if line.startswith(("java ", "for i", "  .venv/bin/streamkit broker", "      --set", "B=", "until ")):
            assert line.split(" > ")[0].rstrip(" \\") in how_to, line


def test_the_readmes_cluster_runs_and_keeps_the_records_through_a_broker_kill(
        tmp_path: Path, need_zookeeper: None) -> None:
    script = _block()
    zk_port, ports = free_port(), [free_port() for _ in range(3)]
    script = script.replace("2181", str(zk_port))
    script = script.replace("127.0.0.1:909$i", "127.0.0.1:${PORTS[$i]}")
    for i, port in enumerate(ports):
        script = script.replace(f"127.0.0.1:909{i}", f"127.0.0.1:{port}")
    assert "909" not in script, script
    # The wait loop's failed attempts are kept for the report, not thrown away.
    script = script.replace("2>/dev/null", "2>>data/waiting.log")
    _shim(tmp_path)
    # Whatever the script leaves running (ZooKeeper, the brokers) ends with it.
    script = (f"PORTS=({' '.join(map(str, ports))})\ntrap 'kill -9 $(jobs -p) 2>/dev/null || true' EXIT\n"
              + script)
    shell = subprocess.Popen(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"})
    hung = ""
    try:
        stdout, stderr = shell.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        hung = _processes(shell.pid)
        os.killpg(shell.pid, signal.SIGKILL)
        stdout, stderr = shell.communicate()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)
    logs = "".join(f"\n--- {p.name}:\n{p.read_text()[-2000:]}" for p in sorted((tmp_path / "data").glob("*.log")))
    assert shell.returncode == 0, f"exit {shell.returncode}\n{stdout[-3000:]}\n{stderr[-3000:]}{hung}{logs}"
    assert "3 broker(s), controller" in stdout, stdout
    assert "created topic orders" in stdout
    rows = [[c.strip() for c in line.strip("│ ").split("│")] for line in stdout.splitlines() if line.startswith("│")]
    described = [r for r in rows if len(r) >= 4 and r[0].isdigit() and "," in r[2]]
    assert [r[0] for r in described] == ["0", "1", "2"], stdout
    assert all(sorted(r[2].split(",")) == ["0", "1", "2"] == sorted(r[3].split(",")) for r in described), stdout
    # Read back after broker 0's death, from the partitions' new leaders.
    assert sorted(stdout.splitlines()[-3:]) == ["a", "b", "c"], stdout


def test_the_readmes_wait_for_the_brokers_ends_under_pipefail(tmp_path: Path) -> None:
    """The script's wait loop ends once the brokers are there, also under ``set -o
    pipefail`` (as the test above runs it, and as scripts often do). Its condition once read
    ``| grep -q``: grep quit at the match, ``streamkit cluster`` then failed writing the rest
    of its table (EPIPE), the pipeline failed, and the loop waited on (most tries, not all:
    it raced the writer)."""
    [condition] = re.findall(r"^until (.*); do sleep 1; done$", _block(), re.M)
    _shim(tmp_path)
    with BrokerProcess(tmp_path / "data") as broker:
        condition = condition.replace("$B", f"127.0.0.1:{broker.port}").replace("3 broker(s)", "1 broker(s)")
        for _ in range(5):
            run = subprocess.run(["bash", "-euo", "pipefail", "-c", condition], cwd=tmp_path, capture_output=True,
                                 text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
            assert run.returncode == 0, f"{condition}\n{run.stdout}{run.stderr}"
