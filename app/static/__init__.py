"""The partitioned static side of the join: its build from the subscriptions (``build``), its
partitions placed on their owners (``side``) and subscription changes sent to the executors
(``broadcasts``). May import ``subscriptions`` and the shared modules of ``app``."""
