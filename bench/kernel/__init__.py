"""`geops bench kernel`: each strategy against the vectorised single-core matching limit
(``run``)."""
