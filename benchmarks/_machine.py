"""What the benchmarks read off the machine: its load, a process's CPU time, and py-spy's
collapsed stacks of a profiled process."""

from __future__ import annotations

import contextlib
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Samples", "cpu_seconds", "machine_load", "read_collapsed"]


def machine_load() -> str:
    """Load average and CPU pressure: other work on the machine skews every figure here."""
    parts = []
    with contextlib.suppress(OSError):
        parts.append("load average " + " ".join(Path("/proc/loadavg").read_text().split()[:3]))
    with contextlib.suppress(OSError, IndexError):
        some = Path("/proc/pressure/cpu").read_text().split("\n")[0]
        parts.append("CPU pressure " + some.split()[1].replace("avg10=", "avg10 ") + "%")
    return ", ".join(parts) or "load unknown"


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads), from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Samples:
    """py-spy samples by function ("name (file)"): where the sample was (``own``) and every
    function on its stack (``incl``); the event loop waiting in select() counts as idle."""

    own: Counter[str] = field(default_factory=Counter)
    incl: Counter[str] = field(default_factory=Counter)
    busy: int = 0
    idle: int = 0

    def top_self(self, n: int) -> list[tuple[float, float, str]]:
        """(self %, inclusive %, function) of the ``n`` hottest by self time, as shares of
        the busy samples."""
        if not self.busy:
            return []
        return [(100 * c / self.busy, 100 * self.incl[f] / self.busy, f) for f, c in self.own.most_common(n)]

    @property
    def busy_share(self) -> float:
        return self.busy / max(self.busy + self.idle, 1)


def read_collapsed(collapsed: Path) -> Samples:
    """The samples of a py-spy ``--format raw`` (collapsed stacks) file; none if unreadable."""
    samples = Samples()
    with contextlib.suppress(OSError):
        for line in collapsed.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack or not count.isdigit():
                continue
            # Aggregate by function: "name (file:line)" -> "name (file)".
            frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]
            k = int(count)
            if frames[-1].startswith(("EpollSelector.select", "select (selectors")):
                samples.idle += k
                continue
            samples.busy += k
            samples.own[frames[-1]] += k
            for frame in set(frames):
                samples.incl[frame] += k
    return samples
