"""The processes of this machine as ``/proc`` shows them: their parents, CPU time and memory,
the role of a process of the app's tree, and the bytes a directory holds on disk.

The parsers take the text of a ``/proc`` file, so that they are tested without processes.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_KB = re.compile(r"^(VmRSS|VmHWM):\s+(\d+)\s+kB", re.M)


def memory_kb(status_text: str) -> tuple[int, int]:
    """(VmRSS, VmHWM) in kB of a /proc/<pid>/status text (0 for what is missing: a zombie or
    kernel thread)."""
    vals = dict(_KB.findall(status_text))
    return int(vals.get("VmRSS", 0)), int(vals.get("VmHWM", 0))


def parse_stat(text: str) -> tuple[int, int]:
    """(pid, ppid) of a /proc/<pid>/stat line (the command may contain spaces and ')')."""
    pid = int(text.split(" ", 1)[0])
    rest = text.rsplit(")", 1)[1].split()
    return pid, int(rest[1])


def cpu_ticks(text: str) -> int:
    """CPU time of a /proc/<pid>/stat line in clock ticks: user + system, its own and that of
    its children it has waited for (utime, stime, cutime, cstime)."""
    rest = text.rsplit(")", 1)[1].split()
    return sum(int(x) for x in rest[11:15])


def descendants(root: int, parents: Mapping[int, int]) -> list[int]:
    """``root`` and every process below it, given {pid: ppid}."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(sorted(children.get(pid, ())))
    return out


def role(cmdline: str, default: str) -> str:
    """What a process of the app's tree is, from its command line."""
    if "java" in cmdline.split(" ", 1)[0] or " org.apache.spark" in cmdline:
        return "app-jvm"
    if "pyspark.daemon" in cmdline or "pyspark/daemon" in cmdline or "pyspark.worker" in cmdline:
        return "app-python-workers"
    return default


def process_parents() -> dict[int, int]:
    """{pid: ppid} of every process on the machine."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                pid, ppid = parse_stat(Path(f"/proc/{entry}/stat").read_text())
                parents[pid] = ppid
    return parents


def cpu_seconds(pid: int) -> float:
    """The CPU seconds (user + system) process ``pid`` has used, 0 once it is gone."""
    try:
        return cpu_ticks(Path(f"/proc/{pid}/stat").read_text()) / CLOCK_TICKS
    except (OSError, ValueError, IndexError):
        return 0.0  # gone meanwhile


def tree_memory(root: int, default: str, parents: Mapping[int, int]
                ) -> list[tuple[int, str, int, int]]:
    """(pid, role, VmRSS kB, VmHWM kB) of ``root`` and every process below it, each process's
    role by ``role`` (``default`` for the rest); processes gone meanwhile are left out."""
    sample = []
    for pid in descendants(root, parents):
        with contextlib.suppress(OSError):
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            rss, hwm = memory_kb(Path(f"/proc/{pid}/status").read_text())
            sample.append((pid, role(cmd.decode(errors="replace"), default), rss, hwm))
    return sample


def tree_bytes(root: Path) -> int:
    """Bytes on disk of the files below ``root``: allocated blocks, not the apparent size
    (Kafka preallocates its index files sparsely at 10 MB each); files that vanish meanwhile
    count nothing."""
    total = 0
    for path in root.rglob("*"):
        with contextlib.suppress(OSError):
            if path.is_file():
                total += path.stat().st_blocks * 512
    return total
