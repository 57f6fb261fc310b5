"""Geofence events in the stream: each batch's positions with their fences (``positions``) and
the events query that keeps each object's state (``query``), whose rules the real-time path
reuses. May import the shared modules of ``app`` only."""
