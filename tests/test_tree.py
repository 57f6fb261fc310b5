"""What the tree holds: no file over 2 MB, so a re-run's raw data cannot grow the history by
megabytes unnoticed (results are compressed, and a large table is stored in parts,
``bench.harness.csv_tables``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MOST_BYTES = 2 * 1024 * 1024


def tracked() -> list[Path]:
    """The files git tracks here (a copy without git skips the test)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [ROOT / name for name in out.decode().split("\0") if name]


def test_no_tracked_file_is_over_2_mb() -> None:
    files = tracked()
    assert files
    big = {str(p.relative_to(ROOT)): p.stat().st_size for p in files
           if p.exists() and p.stat().st_size > MOST_BYTES}
    assert not big, f"files over {MOST_BYTES} bytes (compress them or store them in parts): {big}"
