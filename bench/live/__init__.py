"""`geops bench live`: maximum sustainable rate and latency of the app on a live stream.

``spec`` holds what the command line chose, ``search`` the search for the maximum sustainable
rate, ``run`` the steady, rebalance and soak scenarios and ``main``, ``moving`` (with
``moving_calc``) the hot spot that moves, ``calc`` the pure computations, ``report`` the CSV
files, plots and README.
"""
