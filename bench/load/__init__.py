"""`geops bench load`: reading and encoding subscriptions for `geops subscribe`, before and now
(``run``)."""
