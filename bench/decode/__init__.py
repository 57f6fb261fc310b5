"""`geops bench decode`: decoding a read task's publications, per record vs in one pass
(``run``)."""
