"""`geops generate --objects N`: positions of moving objects along tracks of realistic speed,
detecting and distance fences among the subscriptions, files that subscribe, publish and
`geops match --events` read."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import shapely

from cli.main import main
from config.exitcodes import EXIT_OK, EXIT_USAGE
from geops.avro_input import read_fence_subscriptions_avro, read_fences_avro, read_positions_avro
from geops.errors import ParameterError
from geops.fences import GEOD, fence_geometries
from geops.geojson import read_fence_subscriptions, read_fences, read_positions
from geops.model import DetectKind
from geops.workload import generate_workload
from geops.workload.objects import (
    CROSS_EVERY,
    DETECT_MIX,
    FENCE_SHARE,
    ROAM_GLOBS,
    ROAM_M,
    SPEED_M_S,
)
from geops.workload.skew import SkewSpec

SIZES = {"subscriptions": 400, "publications": 3_000, "interval_ms": 20}


@pytest.fixture(scope="module")
def workload():
    return generate_workload(seed=5, objects=60, **SIZES)


def test_positions_are_points_of_objects_taken_in_turn(workload):
    pubs = workload.publications
    assert (shapely.get_type_id(pubs.geoms) == 0).all()
    assert workload.object_ids.tolist() == [f"object-{i % 60}" for i in range(3_000)]
    assert (np.diff(pubs.event_time) == 20).all()
    assert workload.summary()["objects"]["count"] == 60


def test_each_step_is_at_a_realistic_speed_and_stays_in_the_world(workload):
    xy = shapely.get_coordinates(workload.publications.geoms).reshape(-1, 60, 2)
    _, _, metres = GEOD.inv(xy[:-1, :, 0].ravel(), xy[:-1, :, 1].ravel(),
                            xy[1:, :, 0].ravel(), xy[1:, :, 1].ravel())
    seconds = 60 * 20 / 1000                       # 60 objects, a publication every 20 ms
    speed = np.asarray(metres) / seconds
    assert speed.max() <= SPEED_M_S[1] * 1.0001 and np.median(speed) > SPEED_M_S[0]
    x0, y0, x1, y1 = shapely.total_bounds(workload.world.layers["area"])
    assert ((xy[..., 0] >= x0) & (xy[..., 0] <= x1) & (xy[..., 1] >= y0)
            & (xy[..., 1] <= y1)).all()
    # the objects start at different places and move
    assert len({tuple(p) for p in xy[0]}) == 60 and (speed > 0).mean() > 0.9


def test_a_share_of_the_subscriptions_are_fences_some_by_distance(workload):
    detect, distance = workload.detect, workload.distance_m
    fences = detect != 0
    assert fences.sum() == round(FENCE_SHARE * 400)
    cross = int(DetectKind.CROSS)
    assert set((detect[fences] & ~np.uint8(cross)).tolist()) <= {m for m, _ in DETECT_MIX}
    assert ((detect & cross) > 0).sum() == -(-fences.sum() // CROSS_EVERY)
    assert not (detect & int(DetectKind.OUTSIDE)).any()
    with_distance = ~np.isnan(distance)
    assert (with_distance <= fences).all() and with_distance.sum() == fences.sum() // 2
    points = shapely.get_type_id(workload.subscriptions.geoms) == 0
    assert (points <= with_distance).all() and points.sum() == fences.sum() // 3
    _, problems = fence_geometries(workload.subscriptions.ids[with_distance],
                                   workload.subscriptions.geoms[with_distance],
                                   distance[with_distance])
    assert problems == [None] * int(with_distance.sum())


def test_the_same_seed_gives_the_same_workload(workload):
    again = generate_workload(seed=5, objects=60, **SIZES)
    assert shapely.equals(again.publications.geoms, workload.publications.geoms).all()
    assert (again.detect == workload.detect).all()


def test_skew_is_steered_from_the_starts_and_measured_on_the_positions():
    spec = SkewSpec(workers=2, hot_workers=1, partitions=8, partitioner="kdbtree", target=0.8)
    w = generate_workload(seed=2, objects=200, skew=spec, **SIZES)
    assert w.skew.measured is not None and w.skew.measured > 0.6


@pytest.mark.parametrize("kwargs,flag", [({"objects": -1}, "objects"),
                                         ({"objects": 3_001}, "objects")])
def test_bad_object_counts_are_refused_by_name(kwargs, flag):
    with pytest.raises(ParameterError, match=flag):
        generate_workload(seed=1, **SIZES, **kwargs)
    spec = SkewSpec(workers=2, hot_workers=1, partitions=8, partitioner="kdbtree", target=0.8,
                    moving=True)
    with pytest.raises(ParameterError, match="moving_hotspot"):
        generate_workload(seed=1, objects=5, skew=spec, **SIZES)


def test_the_files_carry_objects_and_fences_for_every_reader(tmp_path, capsys, workload):
    out = tmp_path / "w"
    assert main(["generate", "--out", str(out), "--seed", "5", "--objects", "60",
                 "--subscriptions", "400", "--publications", "3000", "--interval-ms", "20"]) \
        == EXIT_OK
    assert "objects: 60 moving; fences: 80 detecting, 40 with a distance" in \
        capsys.readouterr().out
    doc = json.loads((out / "workload.json").read_text())
    assert doc["parameters"]["objects"] == 60 and doc["objects"]["fences"] == 80
    for subs, detect, distance, _, rejected in (
            read_fence_subscriptions(out / "subscriptions.geojson"),
            read_fence_subscriptions_avro(out / "subscriptions.avro")):
        assert not rejected and (detect == workload.detect).all() and len(subs) == 400
        assert np.allclose(distance, workload.distance_m, atol=0.05, equal_nan=True)
    for pubs, objects, _, rejected in (read_positions(out / "publications.geojson"),
                                       read_positions_avro(out / "publications.avro")):
        assert not rejected and objects.tolist() == workload.object_ids.tolist()
        assert (pubs.event_time == workload.publications.event_time).all()
    assert {"enter", "inside"} <= _event_kinds(out, tmp_path)


def _event_kinds(out, tmp_path) -> set[str]:
    """The kinds of the events `geops match --events` finds in the workload written to out."""
    events = tmp_path / "events.jsonl"
    assert main(["match", "--events", "--subscriptions", str(out / "subscriptions.geojson"),
                 "--publications", str(out / "publications.geojson"), "--out",
                 str(events)]) == EXIT_OK
    return {json.loads(line)["kind"] for line in events.read_text().splitlines()}


def test_point_share_does_not_apply_with_objects(tmp_path, capsys):
    assert main(["generate", "--out", str(tmp_path / "w"), "--objects", "5",
                 "--point-share", "0.5"]) == EXIT_USAGE
    assert "--point-share does not apply with --objects" in capsys.readouterr().err


def test_a_distance_fence_that_cannot_be_made_stays_a_plain_polygon():
    from geops.workload.objects import fences

    huge = shapely.box(-20, 40, 20, 60)             # reaches far beyond 400 km
    geoms, detect, distance = fences(np.random.default_rng(1), np.array([huge] * 30, object))
    assert (detect != 0).sum() == 6 and np.isnan(distance[shapely.get_type_id(geoms) != 0]).all()
    points = shapely.get_type_id(geoms) == 0
    assert points.sum() == 2 and not np.isnan(distance[points]).any()


def test_ids_count_from_first_id_and_nothing_else_changes(workload):
    """A second workload on the same topics (the demo's moving objects) takes ids of its own."""
    shifted = generate_workload(seed=5, objects=60, first_id=1_000_000, **SIZES)
    assert (shifted.subscriptions.ids == workload.subscriptions.ids + 1_000_000).all()
    assert (shifted.publications.ids == workload.publications.ids + 1_000_000).all()
    assert shapely.equals(shifted.publications.geoms, workload.publications.geoms).all()
    assert (shifted.detect == workload.detect).all()


def test_a_share_of_roaming_fences_when_asked(tmp_path, capsys):
    assert main(["generate", "--out", str(tmp_path / "w"), "--seed", "5", "--objects", "60",
                 "--subscriptions", "400", "--publications", "3000", "--interval-ms", "20",
                 "--roam-share", "0.05"]) == EXIT_OK
    assert "fences: 80 detecting, 40 with a distance (26 around points), 20 roaming" in \
        capsys.readouterr().out
    out = tmp_path / "w"
    geojson, avro = (read_fences(out / "subscriptions.geojson"),
                     read_fences_avro(out / "subscriptions.avro"))
    assert geojson[5] == avro[5] and (geojson[1] == avro[1]).all()
    roaming = [k for k, r in enumerate(geojson[5]) if r is not None]
    assert len(roaming) == 20
    both = int(DetectKind.NEARBY | DetectKind.FARAWAY)
    assert (geojson[1][roaming] == both).all()  # drawn among the plain subscriptions
    assert all(r[1] in ROAM_GLOBS and ROAM_M[0] <= r[0] <= ROAM_M[1] for r in geojson[5] if r)
    assert {"enter", "nearby", "faraway"} <= _event_kinds(out, tmp_path)
    # none asked: the same workload as before, no roam
    plain = generate_workload(seed=5, objects=60, **SIZES)
    assert plain.roams is None and (DetectKind.fixed(geojson[1]) == plain.detect).all()


@pytest.mark.parametrize("kwargs,words", [({"roam_share": 0.1}, "needs objects"),
                                          ({"roam_share": 0.9, "objects": 5}, "within [0, 0.8]"),
                                          ({"roam_share": -0.1, "objects": 5}, "within")])
def test_bad_roam_shares_are_refused_by_name(kwargs, words):
    with pytest.raises(ParameterError, match=r"roam_share .*" + re.escape(words)):
        generate_workload(seed=1, **SIZES, **kwargs)
