"""The live web dashboard (`geops dashboard`) and the per-period figures of the running service,
which `geops stats --follow` prints as text (``dashboard.periods``)."""
