"""A consumer-group member in its own process, for tests that SIGKILL it.

    python -m tests.integration.group_member CLIENT BOOTSTRAP GROUP TOPIC ASSIGNOR NAME SESSION_MS

Prints one JSON line ``{"assignment": [partitions...]}`` each time its assignment changes,
until it is killed (or its stdin is closed, which stops it cleanly).
"""

from __future__ import annotations

import json
import sys
import threading
import time
import warnings
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make ``tests.integration`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main(argv: list[str]) -> int:
    warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python's import-time warnings
    from tests.integration.members import Member

    client, bootstrap, group, topic, assignor, name, session_ms = argv
    member = Member(client, bootstrap, group, topic, assignor, name, session_ms=int(session_ms)).start()
    stdin_closed = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stdin_closed.set()), daemon=True).start()
    last: frozenset[int] | None = None
    while not stdin_closed.is_set() and not member.closed:
        if member.assignment != last and member.assignment is not None:
            last = member.assignment
            print(json.dumps({"assignment": sorted(last)}), flush=True)
        time.sleep(0.02)
    member.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
