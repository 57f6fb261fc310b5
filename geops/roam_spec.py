"""What makes a roaming fence (``geops.roam``): the ``roam`` property of a subscription, checked
where subscriptions are read, without the geodesic engine's imports.

``roam = {"distance_m": D, "match": GLOB}``: D metres above zero and at most ``MAX_ROAM_M``
(the stream keeps the objects' positions by cell, each sent to the cells within the largest
distance: a larger one would send every position far), GLOB a non-empty ``fnmatch`` pattern
of object ids. A roaming fence reports ``nearby`` and ``faraway`` (``DetectKind.NEARBY``,
``FARAWAY``): a subscription with ``roam`` whose ``detect`` names neither reports both, one
that names one reports that one; ``detect`` may name them only with ``roam``.
"""

from __future__ import annotations

import math

import numpy as np

from geops.model import ROAMING_KINDS

MAX_ROAM_M = 100_000.0      # the largest roaming distance


def roam_problem(value: object) -> str | None:
    """Why ``value`` is no roam property (``{"distance_m": D, "match": GLOB}``), or None."""
    if not isinstance(value, dict):
        return f"must be an object {{\"distance_m\": metres, \"match\": glob}}, got {value!r}"
    unknown = sorted(set(value) - {"distance_m", "match"})
    if unknown:
        return f"has unknown keys {unknown}; expected distance_m and match"
    distance = value.get("distance_m")
    if (isinstance(distance, bool) or not isinstance(distance, int | float | np.floating
                                                      | np.integer)
            or not math.isfinite(distance) or not 0 < distance <= MAX_ROAM_M):
        return (f"distance_m must be a number of metres above zero and at most "
                f"{MAX_ROAM_M:,.0f}, got {distance!r}")
    return glob_problem(value.get("match"))


def glob_problem(glob: object) -> str | None:
    """Why ``glob`` is no pattern of object ids, or None: a non-empty string without control
    characters whose every ``[`` opens a closed set (``fnmatch`` would take an unclosed one
    literally, which is more likely a typo; ``[[]`` matches a literal ``[``)."""
    if not isinstance(glob, str) or not glob:
        return f"match must be a non-empty glob of object ids, got {glob!r}"
    if any(ord(c) < 32 for c in glob):
        return f"match must not hold control characters, got {glob!r}"
    k = 0
    while k < len(glob):  # fnmatch's own reading of a set: [!...] and a leading ] are in it
        if glob[k] == "[":
            j = k + 1
            j += glob[j:j + 1] == "!"
            j += glob[j:j + 1] == "]"
            end = glob.find("]", j)
            if end < 0:
                return (f"match {glob!r} has an unclosed '[' at {k} (write [[] for a "
                        f"literal '[')")
            k = end
        k += 1
    return None


def parse_roam(value: object) -> tuple[float, str]:
    """(distance in metres, glob) of a roam property; ValueError naming what is wrong."""
    problem = roam_problem(value)
    if problem:
        raise ValueError(f"properties.roam {problem}")
    assert isinstance(value, dict)
    return float(value["distance_m"]), str(value["match"])


def roam_detect(detect: int, roam: tuple[float, str] | None) -> int:
    """The detect kinds of a subscription with its roam (``parse_roam``, None: none): with a
    roam and no roaming kind named, both; ValueError where roaming kinds come without one."""
    if roam is None:
        if detect & ROAMING_KINDS:
            raise ValueError("properties.detect nearby and faraway need properties.roam "
                             "({\"distance_m\": metres, \"match\": glob of object ids})")
        return detect
    return detect if detect & ROAMING_KINDS else detect | ROAMING_KINDS


def roam_record_problem(subscription_id: int, detect: int,
                        roam: tuple[float, str] | None) -> str | None:
    """Why a Subscription record's ``detect`` and ``roam`` make no roaming fence, naming the
    subscription, or None: roaming kinds without a roam, or a roam whose distance or glob is
    refused (``roam_problem``)."""
    if roam is None:
        if detect & ROAMING_KINDS:
            return (f"subscription {subscription_id}: detect NEARBY and FARAWAY need a roam "
                    f"(distance_m and match)")
        return None
    problem = roam_problem({"distance_m": roam[0], "match": roam[1]})
    return None if problem is None else f"subscription {subscription_id}: roam {problem}"
