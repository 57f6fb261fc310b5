"""Benchmark harnesses that drive the whole product (broker, app, distributor) end to end."""
