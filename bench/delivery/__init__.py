"""`geops bench delivery`: what exactly-once output costs against at-least-once (``run``)."""
