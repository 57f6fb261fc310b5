"""Avro schemas of every geops record (``*.avsc``), their version history and codec.

Also holds the control protocol's shared definitions (``assignment``) so that the app, the
distributor and the workload generator agree on them without depending on each other.
"""

from schemas.codec import Codec, codec

__all__ = ["Codec", "codec"]
