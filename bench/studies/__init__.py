"""Studies behind the hand-written results pages in ``docs/results``: one-off measurements and
analyses that a page quotes, kept apart from the ``geops bench`` commands.

Each module is run from the repository's root with the project's ``.venv`` active, as
``python -m bench.studies.<module> [arguments]``, and prints or writes what its page quotes.
Those that read a results directory take it as their argument and read its tables through
``bench.harness.csv_tables`` (so ``loads.csv.gz`` and tables stored in parts work as ``loads.csv``).

- ``ab_decode [DIR]``: the one-pass decoder A/B (``docs/results/ab-decode-2026-11-25/``).
- ``read_ab``: the app's reading path in two trees, interleaved (``docs/results/connector/``);
  ``read_path``: where a read task's time goes between the connector and Python.
- ``hot_partitions``, ``hot_partitions_physical``, ``hot_split``: replication and the
  migration-aware policies (``docs/results/hot-partitions/``,
  ``docs/results/adaptive/physical/full-size/``).
- ``static_memory``: what a worker's Python process holds per subscription
  (``docs/results/scale/``).
- ``eventlog stages|tasks EVENTS``: per-batch stage times, or per-task metrics, from a Spark
  event log (decompressed JSON lines).
- ``cold_start``: how fast the app answers the first publications after it says it is ready
  (``docs/results/live/cold-start/``).
- ``cpu_by_process``: CPU seconds of the broker, Spark's Python workers and the driver over
  one run (start it just before the run).
- ``profile_route``, ``profile_churn``: where a stream-side task's time goes (decode, checks,
  routing), and where applying subscription changes goes, outside Spark.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path


def print_lines(analysis: Callable[[Path], list[str]], argv: list[str] | None,
                default: Path | None = None) -> None:
    """A module's ``main``: print the lines ``analysis`` makes of the results directory named
    by the one argument (``default`` without one)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1 or (not args and default is None):
        raise SystemExit(f"usage: python -m bench.studies.{Path(sys.argv[0]).stem} "
                         + ("[DIR]" if default is not None else "DIR"))
    print("\n".join(analysis(Path(args[0]) if args else default)))
