"""Stacks of a hung job's ranks: where each one is (a collective, the rendezvous, elsewhere), identical
stacks grouped, and the verdict: one rank outside every collective is a straggler; ranks in different
collectives are a collective mismatch; ranks inside init_process_group wait for the rendezvous.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from common.language import say
from jobs import hang_wording as said
from jobs import stack_hints as hints
from jobs.diagnosis import JobDiagnosis, RootCause, Symptom
from jobs.flight_recorder import FrFinding
from jobs.framework_waits import framework_of, framework_wait
from jobs.places import C10D_API, Place, RankStack, StackGroup, phrased
from jobs.pyspy import Frame
from jobs.stack_hints import DETAIL_HINT, FR_HINT, NATIVE_HINT, NCCL_HINT, NODES_HINT, RENDEZVOUS_EVIDENCE
from jobs.wording import pair

__all__ = ["DETAIL_HINT", "FR_HINT", "NATIVE_HINT", "NCCL_HINT", "NODES_HINT", "RENDEZVOUS_EVIDENCE", "HangSnapshot",
           "analyse_stacks", "group_stacks", "locate"]

COLLECTIVES = frozenset({
    "barrier", "monitored_barrier", "all_reduce", "all_reduce_coalesced", "all_gather", "all_gather_into_tensor",
    "all_gather_object", "all_gather_coalesced", "_all_gather_base", "reduce_scatter", "reduce_scatter_tensor",
    "_reduce_scatter_base", "broadcast", "broadcast_object_list", "reduce", "gather", "gather_object", "scatter",
    "scatter_object_list", "all_to_all", "all_to_all_single", "send", "recv", "isend", "irecv", "send_object_list",
    "recv_object_list", "batch_isend_irecv", "inference_all_reduce",
})
POINT_TO_POINT = frozenset({"send", "recv", "isend", "irecv", "send_object_list", "recv_object_list", "batch_isend_irecv"})
RENDEZVOUS = frozenset({
    "init_process_group", "new_group", "new_subgroups", "init_device_mesh", "rendezvous", "_store_based_barrier",
    "_create_c10d_store", "_env_rendezvous_handler", "_tcp_rendezvous_handler", "init_distributed",
    "next_rendezvous", "_rendezvous", "_initialize_workers", "_assign_worker_ranks",
})
_DIST_FILES = (("torch/distributed/", "dist"), ("deepspeed/comm/", "deepspeed.comm"))

@dataclass
class HangSnapshot:
    diagnosis: JobDiagnosis
    groups: list[StackGroup]
    source: str  # "py-spy on HOST", "debug server URL", "Flight Recorder dumps in DIR"
    job: str = ""  # "torchrun (pid 123)"
    flight_recorder: FrFinding | None = None

    def to_json(self) -> dict[str, Any]:
        # the diagnosis's wording too (`ask --json` leaves it out): a reader of `traindoc hang --json` picks a language
        return {"diagnosis": self.diagnosis.to_json() | {"wording": self.diagnosis.wording},
                "groups": [g.to_json() for g in self.groups],
                "source": self.source, "job": self.job,
                "flight_recorder": self.flight_recorder.to_json() if self.flight_recorder else None}



# -- grouping and the verdict ------------------------------------------------------------------------------------

def locate(frames: Sequence[Frame]) -> Place:
    """Where a stack is: the innermost torch.distributed call (with the user frame that made it), else the
    deepest user frame."""
    python = [f for f in frames if f.kind != "native"]
    user = next((f for f in python if f.kind == "user"), None)
    inner = python[0] if python else (frames[0] if frames else None)
    for frame in python:
        path = frame.file.replace("\\", "/")
        prefix = next((p for marker, p in _DIST_FILES if marker in path), None)
        if prefix is None:
            continue
        name = frame.function.rsplit(".", 1)[-1]
        if name in RENDEZVOUS:
            return Place("rendezvous", f"{prefix}.{name}", user, frame)
        if name in COLLECTIVES or (path.endswith(C10D_API) and not name.startswith("_")):
            framework = framework_of(python)
            if framework:
                label, phrase = phrased("hang.label.framework_call", owner=framework, call=f"{prefix}.{name}")
                return Place("collective", label, user, frame, phrase=phrase)
            return Place("collective", f"{prefix}.{name}", user, frame)
    if (wait := framework_wait(frames)) is not None:
        return Place(wait.kind, wait.label, user, wait.frame, inferred=wait.inferred, phrase=wait.phrase)
    if user is None and inner is None:
        label, phrase = phrased("hang.label.no_frame")
        return Place("unreadable", label, phrase=phrase)
    return Place("elsewhere", user.function if user else inner.function if inner else "?", user, inner)


def group_stacks(stacks: Sequence[RankStack], *, native: bool = False) -> list[StackGroup]:
    groups: dict[tuple[Any, ...], StackGroup] = {}
    for stack in sorted(stacks, key=lambda s: s.rank):
        if stack.error is not None:
            place = Place("unreadable", stack.error)
            key: tuple[Any, ...] = ("unreadable", stack.error)
        else:
            place = locate(stack.frames)
            user_frames = tuple((f.function, f.file, f.line) for f in stack.frames if f.kind == "user")
            key = (place.kind, place.label, user_frames, place.inner.text() if place.inner else None)
        group = groups.get(key)
        if group is None:
            shown = [f.text() for f in stack.frames if native or f.kind != "native"][:16]
            group = groups[key] = StackGroup(place, [], frames=shown)
        group.ranks.append(stack.rank)
        if stack.pid is not None:
            group.pids.append(stack.pid)
        if stack.host and stack.host not in group.hosts:
            group.hosts.append(stack.host)
    order = {"collective": 0, "rendezvous": 1, "device": 2, "elsewhere": 3, "unreadable": 4}
    return sorted(groups.values(), key=lambda g: (order[g.place.kind], -len(g.ranks), g.ranks[0]))


def analyse_stacks(stacks: Sequence[RankStack], *, world_size: int | None = None, source: str = "",
                   job: str = "", native: bool = False) -> HangSnapshot:
    """Groups the ranks' stacks and names the odd ones out (see the module docstring)."""
    groups = group_stacks(stacks, native=native)
    by_rank = {s.rank: s for s in stacks}
    ranks = sorted(by_rank)
    coll = [g for g in groups if g.place.kind == "collective"]
    rdv = [g for g in groups if g.place.kind == "rendezvous"]
    other = [g for g in groups if g.place.kind == "elsewhere"]
    device = [g for g in groups if g.place.kind == "device"]
    lost = [g for g in groups if g.place.kind == "unreadable"]
    summary, summary_zh = (said.summary(groups, lang) for lang in ("en", "zh"))
    remote = bool(world_size and world_size > len(ranks))
    symptoms: list[tuple[Symptom, str]] = []  # each with its Chinese
    why: tuple[str, str] = ("", "")
    where = coll[0].place if coll else None  # the collective the others wait in
    odd: list[StackGroup] = []
    if not coll and not rdv and not other and not device:
        category, rank, confidence = "unknown", None, 0.1
        next_evidence = [(said.label(lost[0].place, "en"), said.label(lost[0].place, "zh"))] if lost else []
    elif rdv and other and not coll:  # the others wait in init_process_group for the rank still before it
        category, odd = "straggler", other
        odd_ranks = sorted(r for g in other for r in g.ranks)
        waiting = sorted(r for g in rdv for r in g.ranks)
        rank, confidence = odd_ranks[0], 0.7 if len(odd_ranks) == 1 else 0.5
        why = _both(said.before_init, waiting, odd_ranks, rdv[0].place.label)
        next_evidence = [_both(said.look_at, odd[0])]
    elif rdv:
        category, rank, confidence = "rendezvous", None, 0.7
        missing = sorted(set(range(world_size or 0)) - set(ranks))
        if missing:
            summary, summary_zh = _add((summary, summary_zh), _both(said.rendezvous_missing, world_size, missing))
        next_evidence = [pair(key) for key in hints.RENDEZVOUS + ([hints.NODES] if remote else [])]
        odd = rdv
    elif coll and other:
        category = "straggler"
        odd = other
        odd_ranks = sorted(r for g in other for r in g.ranks)
        waiting = sorted(r for g in coll for r in g.ranks)
        rank = odd_ranks[0]
        confidence = 0.8 if len(odd_ranks) == 1 else 0.6 if len(odd_ranks) < len(waiting) else 0.4
        why = _both(said.straggler, waiting, odd_ranks)
        symptoms = [(Symptom("collective_wait", g.ranks, said.phrase(g, "en")), said.phrase(g, "zh")) for g in coll]
        next_evidence = [_both(said.look_at, odd[0]), pair(hints.DETAIL)]
    elif device and other and not coll:
        category, odd = "straggler", other
        odd_ranks = sorted(r for g in other for r in g.ranks)
        syncing = sorted(r for g in device for r in g.ranks)
        rank, confidence = odd_ranks[0], 0.4
        why = _both(said.gpu_straggler, syncing, odd_ranks)
        next_evidence = [pair(hints.FR), pair(hints.NATIVE)]
    elif device and not coll:
        category, rank, confidence = "unknown", None, 0.2
        summary, summary_zh = _add((summary, summary_zh), pair("hang.every_rank_on_its_gpu"))
        next_evidence = [pair(hints.FR), pair(hints.NATIVE), pair(hints.NCCL)]
    elif len(coll) == 1 and coll[0].place.inferred and not other and not lost:
        category, rank, confidence = "unknown", None, 0.2
        summary, summary_zh = _add((summary, summary_zh), pair("hang.backward_undecided"))
        next_evidence = [pair(hints.NATIVE), pair(hints.FR), pair(hints.DETAIL)]
    elif len(coll) > 1:
        category = "collective_mismatch"
        sizes = sorted(len(g.ranks) for g in coll)
        minority = [g for g in coll if len(g.ranks) == sizes[0]]
        odd = minority if sizes[0] < sizes[-1] else coll[1:]
        rank = odd[0].ranks[0] if len(odd) == 1 and len(odd[0].ranks) == 1 else None
        confidence = 0.7 if rank is not None else 0.5
        majority = next(g for g in coll if g not in odd)
        where = majority.place
        why = _both(said.mismatch, majority.ranks, majority.place)
        symptoms = [(Symptom("collective_wait", majority.ranks, said.phrase(majority, "en")), said.phrase(majority, "zh"))]
        next_evidence = [pair(hints.DETAIL), pair(hints.FR)]
    elif coll and not lost:
        category, rank = ("unknown", None) if remote else ("network", None)
        confidence = 0.2 if remote else 0.3
        if remote:
            summary, summary_zh = _add((summary, summary_zh), _both(said.remote, (world_size or 0) - len(ranks)))
            next_evidence = [pair(hints.NODES), pair(hints.FR), pair(hints.NCCL)]
        elif coll[0].place.label.rsplit(".", 1)[-1] in POINT_TO_POINT:
            category, confidence = "collective_mismatch", 0.6
            summary, summary_zh = _add((summary, summary_zh), pair("hang.p2p_deadlock"))
            next_evidence = [pair(hints.DETAIL), pair(hints.FR)]
        else:
            summary, summary_zh = _add((summary, summary_zh), pair("hang.same_collective"))
            next_evidence = [pair(hints.FR), pair(hints.NCCL), pair(hints.DETAIL), pair(hints.NATIVE)]
    elif coll:
        category, rank, confidence = "unknown", None, 0.3
        odd = lost
        summary, summary_zh = _add((summary, summary_zh), pair("hang.unreadable_may_be_it"))
        next_evidence = [(said.label(lost[0].place, "en"), said.label(lost[0].place, "zh")), pair(hints.FR)]
    else:
        category, rank, confidence = "unknown", None, 0.2
        summary, summary_zh = _add((summary, summary_zh), pair("hang.no_collective"))
        next_evidence = [pair(hints.NATIVE), pair("hang.hint.job_log")]
    lead = odd[0] if odd else (coll[0] if coll else groups[0])
    root = RootCause(category, rank, summary, host=lead.hosts[0] if len(lead.hosts) == 1 else None,
                     evidence=_evidence(lead, by_rank), where=_where(lead), confidence=confidence)
    diagnosis = JobDiagnosis(kind="hang", root_cause=root, symptoms=[s for s, _ in symptoms], timeline=[], ranks=ranks,
                             why_consequences=why[0], collective=where.text() if where else None,
                             next_evidence=[en for en, _ in next_evidence], search_lines=[summary],
                             wording={"zh": said.wording(summary_zh, why[1], [zh for _, zh in next_evidence],
                                                         [zh for _, zh in symptoms],
                                                         said.place(where, "zh") if where else None)})
    from jobs.picture.hang import hang_picture  # the snapshot drawn as a job's lanes: `traindoc hang --timeline`, the web

    diagnosis.picture = hang_picture(groups, odd, world_size, where.text() if where else None,
                                     {i: said.label(g.place, "en") for i, g in enumerate(groups)},
                                     {rank: stack.host for rank, stack in by_rank.items()})
    return HangSnapshot(diagnosis, groups, source, job)


def _both(saying: Callable[..., str], *args: Any) -> tuple[str, str]:
    """(English, Chinese) of ``saying(*args, lang)``, one of jobs.hang_wording's sentences."""
    return saying(*args, "en"), saying(*args, "zh")


def _add(sentence: tuple[str, str], more: tuple[str, str]) -> tuple[str, str]:
    return sentence[0] + more[0], sentence[1] + more[1]


def _evidence(group: StackGroup, by_rank: dict[int, RankStack]) -> list[str]:
    if group.place.kind == "unreadable" or not group.ranks:
        return [group.place.label]
    stack = by_rank[group.ranks[0]]
    frames = [f for f in stack.frames if f.kind != "native"] or list(stack.frames)
    user = [f for f in frames if f.kind == "user"]
    shown = ([frames[0]] if frames and frames[0].kind != "user" else []) + user
    return [say("hang.evidence", "en", rank=stack.rank, frame=f.text()) for f in shown[:6]]


def _where(group: StackGroup) -> str | None:
    place = group.place
    return place.user.where if place.user else (place.inner.text() if place.inner else None)
