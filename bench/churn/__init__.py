"""`geops bench churn`: a live stream while subscriptions change, what the changes cost the
publications and how soon each takes effect.

``run`` runs the levels of each cell, ``calc`` holds the pure computations (the mix of changes,
time to effect, the ratios to the level without changes), ``report`` the results page.
"""
