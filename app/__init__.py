"""The Spark Structured Streaming app: Kafka source, stream-static join, metrics and control I/O."""
