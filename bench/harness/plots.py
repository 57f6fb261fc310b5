"""Plots of the benchmarks: matplotlib drawing to files, with no display."""

from __future__ import annotations

from typing import Any


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (PNG files only); imported when a benchmark
    draws, not when it starts."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt
