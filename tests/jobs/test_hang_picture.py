"""Issue 41 point 3 for a live hang snapshot: the same picture as a triaged job's (a lane per rank by node), each
rank's mark where its stack waits, the odd ones out marked, the ranks no stack was read from absent; written by
`traindoc hang --timeline` (a real hung job, read with py-spy) and carried by the diagnosis every front end shows."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from jobs.hang import RankStack, analyse_stacks
from jobs.picture import svg_of
from jobs.pyspy import Frame, classify

SVG = "{http://www.w3.org/2000/svg}"
C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"


def _frames(*spec: tuple[str, str, int]) -> tuple[Frame, ...]:
    return tuple(Frame(name, path, line, classify(path)) for name, path, line in spec)


def _lanes(svg: str) -> dict[str, set[str]]:
    root = ET.fromstring(svg)
    return {g.get("data-rank", ""): set(g.get("class", "").split()) for g in root.iter(f"{SVG}g")
            if "lane" in g.get("class", "").split() and g.get("data-rank")}


def test_a_straggler_snapshot_draws_every_rank_the_straggler_first_and_the_unread_ranks_absent() -> None:
    waiting = _frames(("all_reduce", C10D, 100), ("train_step", "/job/train.py", 40), ("<module>", "/job/train.py", 90))
    loading = _frames(("load_shard", "/job/data.py", 12), ("train_step", "/job/train.py", 31))
    stacks = [RankStack(r, waiting, pid=10 + r, host="node-a" if r < 2 else "node-b") for r in (0, 1, 3)]
    stacks.append(RankStack(2, loading, pid=12, host="node-b"))
    snapshot = analyse_stacks(stacks, world_size=6)
    assert snapshot.diagnosis.root_cause is not None and snapshot.diagnosis.root_cause.rank == 2
    svg = svg_of(snapshot.diagnosis, "en")
    assert svg is not None
    lanes = _lanes(svg)
    assert sorted(lanes, key=int) == ["0", "1", "2", "3", "4", "5"]
    assert "first-failure" in lanes["2"] and not any("first-failure" in lanes[r] for r in ("0", "1", "3"))
    assert {r for r, c in lanes.items() if "absent" in c} == {"4", "5"}  # in the world, no stack read
    root = ET.fromstring(svg)
    firsts = [e.get("data-rank") for e in root.iter() if {"mark", "first-failure"} <= set(e.get("class", "").split())]
    assert firsts == ["2"]
    nodes = [g.get("data-node") for g in root.iter(f"{SVG}g") if "node" in g.get("class", "").split()]
    assert nodes[:2] == ["node-a", "node-b"]

