"""`geops bench live`: maximum sustainable rate and latency of the app on a live stream."""
