"""Kafka plumbing shared by the app, the distributor and the CLI.

Clients, topics, offsets, the local Apache Kafka and the pinned JVM artifacts.
"""
