"""The real-time path (``geops app --mode real-time``): answers as publications arrive.

One long-running Spark task per worker reads its share of the publications topic's partitions
with its own Kafka consumer, matches each record against every subscription held in the task
(the static side whole, as the replicated-index pipelines hold their index), and writes each
``Match`` at once; it follows the subscriptions topic while it runs. No micro-batch stands
between a publication and its answer. ``static_side`` holds the task's subscriptions, ``task``
the loop a task runs, ``events`` its objects' geofence events, ``delivery`` how its output
reaches Kafka, ``period`` its summaries, ``sizing`` whether the static side fits a task, and
``driver`` the Spark job that keeps the tasks running.

It may import from ``app`` what both paths share (``subscription_scan``'s rules that turn
subscription records into subscriptions, ``events_query``'s event rules, ``metrics``,
``faults``) and the layers below ``app``; ``app.main`` starts it (``run_real_time``), and the
micro-batch path does not import it.
"""
