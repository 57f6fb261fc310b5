"""The benchmarks that drive the whole product (broker, app, distributor): ``harness``, what
they share; one package per ``geops bench`` command (``kernel``, ``decode``, ``load``,
``paper``, ``live``, ``churn``, ``delivery``, ``scale``, ``chaos``); ``studies``, the one-off
studies a results page quotes. docs/architecture.md, "The benchmarks", says which imports
which."""
