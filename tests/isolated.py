"""A Python that sees the third-party packages of this venv but not the geops project: what a
cluster's executors have when only the dependencies are installed there."""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path


def environ_without_pythonpath() -> dict[str, str]:
    """This environment without a ``PYTHONPATH`` (which could lead to the project)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def python_without_project(folder: Path) -> Path:
    """An executable that runs this interpreter with ``-S``: no site processing, so not the
    ``.pth`` of the editable install; site-packages is put on the path by hand, after whatever
    ``PYTHONPATH`` the caller (Spark) gives."""
    paths = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    script = folder / "python-without-geops"
    script.write_text(f'#!/bin/sh\nPYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}'
                      f'{os.pathsep.join(paths)}" exec "{sys.executable}" -S "$@"\n')
    script.chmod(0o755)
    return script
