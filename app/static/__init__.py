"""The partitioned static side of the join: its build from the subscriptions (``build``), its
partitions placed on their owners (``side``), subscription changes sent to the executors
(``broadcasts``) and its snapshot in the checkpoint (``snapshot``: the files and their checks;
``snapshot_writer``: the thread that keeps it current). May import ``subscriptions`` and the
shared modules of ``app``."""
