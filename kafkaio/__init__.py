"""Kafka plumbing shared by the app, the distributor and the CLI.

Clients, topics, offsets and the embedded broker.
"""
