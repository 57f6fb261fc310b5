"""R-tree indexes (``rtree``/libspatialindex) with insert and delete for subscription churn.

``EnvelopeIndex`` is the R-tree itself; ``PartitionIndex`` holds one static partition's
subscriptions (with a per-partition R-tree for sPIS); ``GlobalIndex`` is the replicated
(partition, id) index of RIhPS and RIsPS.
"""

from geops.index.envelope import EnvelopeIndex
from geops.index.global_index import GlobalIndex
from geops.index.partition import PartitionIndex

__all__ = ["EnvelopeIndex", "GlobalIndex", "PartitionIndex"]
