"""Studies behind the hand-written results pages in ``docs/results``: one-off measurements and
analyses that a page quotes, kept apart from the ``geops bench`` commands.

Each module is run from the repository's root with the project's ``.venv`` active, as
``python -m bench.studies.<module> [arguments]``, and prints or writes what its page quotes.
Those that read a results directory take it as their argument and read its tables through
``bench.harness.csv_tables`` (so ``loads.csv.gz`` and tables stored in parts work as
``loads.csv``).

A study imports the harness (``bench.harness``), the product's packages and, of a command,
only its package's public surface (``from bench.paper import ...``), never another study:
what two studies share belongs to the harness (tests/bench/test_bench_layers.py).

- ``ab_decode [DIR]``: the one-pass decoder A/B (its directory is in git history).
- ``read_ab``: the app's reading path in two trees, interleaved (``docs/results/connector/``);
  ``read_path``: where a read task's time goes between the connector and Python.
- ``hot_partitions``, ``hot_partitions_physical``, ``hot_split``: replication and the
  migration-aware policies (``docs/results/hot-partitions/``,
  ``docs/results/adaptive/physical/full-size/``).
- ``simulate_adaptive``: the adaptive distributor against Static STAL and Table 1's, simulated
  over the physical runs' cost models (``docs/results/adaptive/``).
- ``static_memory``: what a worker's Python process holds per subscription
  (``docs/results/scale/``).
- ``eventlog stages|tasks EVENTS``: per-batch stage times, or per-task metrics, from a Spark
  event log (decompressed JSON lines).
- ``cost_model``, ``real_time_mode``: the fixed and per-record cost of each stage of a batch,
  and what Spark's real-time mode would run instead (``docs/results/live/costs/``).
- ``cold_start``: how fast the app answers the first publications after it says it is ready
  (``docs/results/live/cold-start/``).
- ``restart``: a restarted app's process start to its first answer, from the static side's
  snapshot and from the subscriptions topic, interleaved (``docs/results/restart/``).
- ``takeover``: a standby's takeover, from a kill or a freeze of the active app's driver to
  the standby's first answer, kills and freezes in turn (``docs/results/restart/``).
- ``cpu_by_process``: CPU seconds of the broker, Spark's Python workers and the driver over
  one run (start it just before the run).
- ``profile_route``, ``profile_churn``: where a stream-side task's time goes (decode, checks,
  routing), and where applying subscription changes goes, outside Spark.
"""
