"""The micro-batch path: the runner that plans each batch (``runner``), the join tasks on the
executors (``tasks``), the batch's output records (``output``), the control topic's
assignments (``control``) and the number of join workers (``workers``). May import
``static``, ``events``, ``read``, ``subscriptions`` and the shared modules of ``app``."""
