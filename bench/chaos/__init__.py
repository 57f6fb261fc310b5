"""`geops bench chaos`: faults one after another, drawn at random, while a live stream runs
through the app and the distributor in exactly-once mode on a three-node cluster; at the end
the matches equal the oracle's exactly.

``cluster`` runs the standalone Spark cluster whose executors a fault kills, ``producer`` the
publisher that a fault kills and that resumes where it left off, ``faults`` the fault kinds and
their schedule, ``run`` the run, its checks and its report.
"""
