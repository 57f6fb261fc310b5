"""The geospatial core: model, relations, partitioners, R-tree indexes, strategies, workloads.

Imports neither Spark nor Kafka, so everything here is unit-testable in milliseconds and shared
by the app, the offline matcher, the benchmarks and the tests.
"""
