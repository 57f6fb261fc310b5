"""`geops bench events`: what detecting geofence events costs (``run``)."""
