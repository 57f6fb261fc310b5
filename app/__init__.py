"""The Spark Structured Streaming app, as rooms that each hold one family of its work.

``main`` starts the app and chooses its path; the rooms below it import only rooms listed
after them (and the shared modules at the top of ``app``), which ``tests/test_layers.py``
checks:

- ``launch``: the driver process around Spark (spark-submit's arguments, fatal JVM errors, the
  watchdog that ends an orphaned driver);
- ``batch``: the micro-batch runner, its join tasks and their output, the control channel and
  the worker count;
- ``realtime``: the real-time path, long-running tasks that answer as records arrive;
- ``static``: the partitioned static side (its build, its placement, subscription changes as
  broadcasts);
- ``events``: geofence events in the stream (positions with their fences, each object's state);
- ``read``: reading publications (Spark's Kafka source, the offset log, the tasks' own reads);
- ``subscriptions``: the subscriptions topic (the start-up scan, the live feed of changes).

The shared modules (``errors``, ``executors``, ``faults``, ``metrics``, ``joins``, ``records``)
import no room.
"""
