"""`geops match`: identical output for the four strategies, equal to the oracle; input errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cli.main import main
from geops.geojson import write_publications, write_subscriptions
from geops.model import Publications, Subscriptions
from geops.oracle import oracle_match
from geops.strategies import STRATEGIES


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, cases):
    """Awkward lattice cases as GeoJSON, with repeated publication ids."""
    root = tmp_path_factory.mktemp("match")
    subs = cases.subscriptions(21, n=100)
    _, geoms = cases.publications(21, subs, None, n=160)
    pub_ids = np.arange(len(geoms)) // 2 * 3  # every id twice
    pubs = Publications(pub_ids, geoms, np.zeros(len(geoms)))
    write_subscriptions(root / "subs.geojson", subs)
    write_publications(root / "pubs.geojson", pubs)
    return root, subs, pubs


def _expected_lines(subs: Subscriptions, pubs: Publications) -> list[str]:
    keys, offsets, ids = oracle_match(subs, np.arange(len(pubs)), pubs.geoms)
    return [json.dumps({"publication_id": int(pubs.ids[k]),
                        "subscription_ids": ids[offsets[i]:offsets[i + 1]].tolist()})
            for i, k in enumerate(keys.tolist())]


def test_four_strategies_write_the_oracle_matches(inputs, capsys):
    root, subs, pubs = inputs
    outputs = []
    for strategy in STRATEGIES:
        out = root / f"{strategy}.jsonl"
        code = main(["match", "--subscriptions", str(root / "subs.geojson"), "--publications",
                     str(root / "pubs.geojson"), "--strategy", strategy, "--partitions", "6",
                     "--partitioner", "quadtree", "--out", str(out)])
        assert code == 0
        outputs.append(out.read_text())
        err = capsys.readouterr().err
        assert "publications matched" in err and "rejected" in err
    assert len(set(outputs)) == 1
    assert outputs[0].splitlines() == _expected_lines(subs, pubs)


def test_rejected_features_are_reported_and_skipped(inputs, tmp_path, capsys):
    root, subs, pubs = inputs
    doc = json.loads((root / "subs.geojson").read_text())
    good = doc["features"]
    bad_geometry = {"type": "Feature", "properties": {"id": 5000, "relation": "within"},
                    "geometry": {"type": "Polygon",
                                 "coordinates": [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]]}}
    no_relation = {"type": "Feature", "properties": {"id": 5001}, "geometry": good[0]["geometry"]}
    replaced = json.loads(json.dumps(good[3]))  # same id as feature 3, later: replaces it
    replaced["properties"]["relation"] = "disjoint"
    doc["features"] = [*good, bad_geometry, no_relation, replaced]
    (tmp_path / "subs.geojson").write_text(json.dumps(doc))
    out = tmp_path / "out.jsonl"
    code = main(["match", "--subscriptions", str(tmp_path / "subs.geojson"), "--publications",
                 str(root / "pubs.geojson"), "--strategy", "RIsPS", "--out", str(out)])
    assert code == 3
    err = capsys.readouterr().err
    n = len(good)
    assert f"feature {n}: invalid geometry" in err
    assert f"feature {n + 1}: missing properties.relation" in err
    assert f"feature 3: subscription id {subs.ids[3]} is replaced by feature {n + 2}" in err
    rows = np.r_[0:3, 4:len(subs), 3]
    now = Subscriptions(subs.ids[rows], subs.geoms[rows], subs.relations[rows])
    now.relations[-1] = 9  # DISJOINT
    assert out.read_text().splitlines() == _expected_lines(now, pubs)


def test_usage_errors(inputs, tmp_path, capsys):
    root, _, _ = inputs
    code = main(["match", "--subscriptions", str(tmp_path / "nope.geojson"), "--publications",
                 str(root / "pubs.geojson"), "--out", str(tmp_path / "o.jsonl")])
    assert code == 2
    err = capsys.readouterr().err
    assert "nope.geojson: file not found" in err and "Traceback" not in err
    code = main(["match", "--subscriptions", str(root / "subs.geojson"), "--publications",
                 str(root / "pubs.geojson"), "--out", str(tmp_path / "no" / "dir.jsonl")])
    assert code == 2
    assert "No such file or directory" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["match", "--subscriptions", "a", "--publications", "b", "--out", "c",
              "--partitions", "0"])
    assert exit_info.value.code == 2
