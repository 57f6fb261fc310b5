"""Reading publications: Spark's Kafka source and its options (``source``), the offsets of each
batch in Spark's offset log (``offsetlog``) and the join tasks' own reads of small batches
(``ranges``). May import the shared modules of ``app`` only."""
