"""`geops bench scale`: the app with 10k .. 1M subscriptions.

``run`` runs each strategy and size, ``calc`` reads what the app's log and metrics say of a
run, ``memory`` samples the memory of the app's processes and the machine's load, ``report``
draws the table and the plots.
"""
