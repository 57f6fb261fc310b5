"""`geops bench paper`: the paper's evaluation (six modes, four pipelines, skew) on this machine."""
