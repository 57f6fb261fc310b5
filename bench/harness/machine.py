"""What a results page says its numbers were measured on, and with which command: the same
words for every benchmark, so that pages can be set side by side."""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import time
from collections.abc import Sequence
from typing import Any


def machine() -> dict[str, Any]:
    """The machine as a record (``meta.json``, ``summary.json``): cores, platform, Python,
    PySpark and Java versions, the date."""
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    return {"cpus": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "pyspark": pyspark.__version__,
            "java": java.splitlines()[0] if java else "unknown",
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}


def describe() -> str:
    """The machine in one line of a README: cores, platform, Python, the date."""
    return (f"{os.cpu_count()} cores, {platform.platform()}, Python "
            f"{platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M %Z')}")


def command_line(argv: Sequence[str]) -> str:
    """The command a benchmark was run with, as a shell would take it."""
    return shlex.join(argv) if argv else "(not recorded)"
