"""Where publications lie, for the map's point layer: the centre of each one's envelope."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import shapely

from schemas.publication_decoder import decode_publications


def publication_points(values: Sequence[bytes | None]) -> np.ndarray:
    """(n, 2) x, y of the envelope centre of every decodable Publication record in ``values``
    (a point is its own centre); records that do not decode, or whose geometry does not, are
    left out."""
    if not values:
        return np.empty((0, 2))
    decoded = decode_publications(values)
    if not len(decoded.geometries):
        return np.empty((0, 2))
    geoms = shapely.from_wkb(decoded.geometries, on_invalid="ignore")
    bounds = shapely.bounds(geoms)
    centres = np.column_stack([(bounds[:, 0] + bounds[:, 2]) / 2,
                               (bounds[:, 1] + bounds[:, 3]) / 2])
    return centres[np.isfinite(centres).all(axis=1)]
