"""The driver process around Spark: spark-submit's arguments, fatal JVM failures told in one
line, and the watchdog that ends a driver whose JVM is gone. May import ``read`` (the
connector's jars) and the shared modules of ``app``."""
