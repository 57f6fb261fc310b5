"""The real-time path (``geops app --mode real-time``): answers as publications arrive.

One long-running Spark task per worker reads its share of the publications topic's partitions
with its own Kafka consumer, matches each record against every subscription held in the task
(the static side whole, as the replicated-index pipelines hold their index), and writes each
``Match`` at once; it follows the subscriptions topic while it runs. No micro-batch stands
between a publication and its answer. ``static_side`` holds the task's subscriptions, ``task``
the loop a task runs, ``driver`` the Spark job that keeps the tasks running.

It may import ``app.subscription_scan`` (the rules that turn subscription records into
subscriptions), ``app.main``'s session helpers (through ``driver``), and the layers below
``app``; the micro-batch path does not import it.
"""
