"""The picture of a live hang snapshot (``jobs.stacks.analyse_stacks``): the same lanes as a triaged job's, one per
rank grouped by node, each rank's mark at the place its stack waits in (one column per place, in the snapshot's
order: there is no time in one snapshot), the odd ones out marked as the first failure, the ranks waiting for them
as symptoms, and the ranks of the world no stack was read from as absent."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from jobs.picture.lanes import JobPicture, Lane, Mark, Role, by_node

if TYPE_CHECKING:
    from jobs.places import StackGroup

WAITING = frozenset({"collective", "rendezvous", "device"})  # the places where a rank waits for the others


def hang_picture(groups: Sequence[StackGroup], odd: Sequence[StackGroup], world_size: int | None,
                 where: str | None, label: dict[int, str], hosts: dict[int, str | None]) -> JobPicture:
    """``odd``: the groups the verdict names (the straggler, the minority of a mismatch); ``label``: each group's
    place in words, by the group's index in ``groups``; ``hosts``: each read rank's host (None: not named)."""
    odd_ids = {id(g) for g in odd}
    seen = sorted(hosts)
    world = sorted(set(range(world_size or 0)) | set(seen))
    absent = {rank for rank in world if rank not in hosts}
    first_ranks = sorted(rank for g in odd for rank in g.ranks)
    first = first_ranks[0] if first_ranks else None
    lanes = by_node([Lane(rank, hosts.get(rank), rank in first_ranks, rank in absent, rank not in absent)
                     for rank in world])
    marks: list[Mark] = []
    for at, group in enumerate(groups):
        role: Role = "first" if id(group) in odd_ids else "symptom" if group.place.kind in WAITING else "failure"
        for rank in group.ranks:
            marks.append(Mark(rank, role, group.place.kind, label.get(at, group.place.label), float(at), None, False))
    first_at = next((m.at for m in marks if m.role == "first"), None)
    return JobPicture(lanes, marks, False, None, float(max(len(groups) - 1, 1)), first_at, first, where, 0,
                      list(dict.fromkeys(lane.node for lane in lanes)))
