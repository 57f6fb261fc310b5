"""Exit codes of every geops process: the commands, the Spark app and the distributor.

One table, at the bottom of the layers, so that a code means the same wherever it is returned;
an error that ends a process with one of them (a ``config.errors.GeopsError``) carries it as
``exit_code``.
"""

EXIT_OK = 0
EXIT_FAILED = 1       # the work failed (broker unreachable, app crashed, ...)
EXIT_USAGE = 2        # bad command line or configuration
EXIT_REJECTED = 3     # the work was done but some input records were rejected
EXIT_OUTAGE = 4       # Kafka did not answer for longer than the outage limit
EXIT_DATA_LOSS = 5    # offsets to read no longer exist (topic reset, recreated or truncated)
EXIT_FATAL = 6        # the Spark JVM or the driver hit a fatal error (out of memory, crash, killed)
EXIT_REPLACED = 7     # another process of the app took its lease over (a standby): stopped at once
EXIT_INTERRUPTED = 130  # stopped by Ctrl-C before the work was done (128 + SIGINT)
