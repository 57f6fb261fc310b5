"""Analyses behind the hand-written results pages in ``docs/results``.

Each module is run from the repository's root with the project's ``.venv`` active, as
``python -m bench.analysis.<module> [arguments]``, and prints what the pages quote. Those that
read a results directory take it as their argument and read its tables through
``bench.paper.rows`` (so ``loads.csv.gz`` works as ``loads.csv``).

- ``ab_decode [DIR]``: the one-pass decoder A/B (``docs/results/ab-decode-2026-11-25/``):
  throughput per side, the gains, the steady-state split.

The 2026-11-24 re-check (``docs/results/recheck-2026-11-24/``):

- ``recheck_summary DIR``: sPS and sPIS throughput ratios per repeat at skew 0.9, and the
  mean batch split;
- ``epochs DIR``: per dynamic run at 0.9, when epoch 1 starts and the batch time before and
  after it;
- ``shares DIR``: per dynamic run at 0.9 and epoch, the busier worker's share of items and
  of processing time;
- ``command_race DIR``: per dynamic run at 0.9, the distributor's first command against the
  start of the app's batch 1;
- ``eventlog stages|tasks EVENTS``: per-batch stage times, or per-task metrics, from a Spark
  event log (decompressed JSON lines);
- ``cpu_by_process``: CPU seconds of the broker, Spark's Python workers and the driver over
  one bench run (start it just before the run);
- ``profile_route``: where one stream-side task's time goes (decode, checks, routing),
  outside Spark.
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
        raise SystemExit(f"usage: python -m bench.analysis.{Path(sys.argv[0]).stem} "
                         + ("[DIR]" if default is not None else "DIR"))
    print("\n".join(analysis(Path(args[0]) if args else default)))
