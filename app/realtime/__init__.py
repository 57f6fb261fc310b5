"""The real-time path (``geops app --mode real-time``): answers as publications arrive.

One long-running Spark task per worker reads its share of the publications topic's partitions
with its own Kafka consumer, matches each record against every subscription held in the task
(the static side whole, as the replicated-index pipelines hold their index), and writes each
``Match`` at once; it follows the subscriptions topic while it runs. No micro-batch stands
between a publication and its answer. ``static_side`` holds the task's subscriptions, ``task``
the loop a task runs, ``events`` its objects' geofence events, ``delivery`` how its output
reaches Kafka, ``period`` its summaries, ``sizing`` whether the static side fits a task, and
``driver`` the Spark job that keeps the tasks running.

It may import the rooms both paths share (``subscriptions``' rules that turn subscription
records into subscriptions, ``events``' event rules) and the shared modules of ``app``
(``metrics``, ``faults``); ``app.main`` starts it (``run_real_time``), and the micro-batch path
(``batch``) does not import it.
"""
