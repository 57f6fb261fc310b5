"""The subscriptions topic: the start-up scan that turns its records into subscriptions
(``scan``) and the feed of changes that follows it while the app runs (``feed``). May import
the shared modules of ``app`` only."""
