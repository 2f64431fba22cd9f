"""Stacks of a hung job's ranks: where each one is (a collective, the rendezvous, elsewhere), identical
stacks grouped, and the verdict: one rank outside every collective is a straggler; ranks in different
collectives are a collective mismatch; ranks inside init_process_group wait for the rendezvous.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jobs import hang_wording as zh
from jobs.diagnosis import JobDiagnosis, RootCause, Symptom, ranks_text, span
from jobs.flight_recorder import FrFinding
from jobs.framework_waits import framework_of, framework_wait
from jobs.places import C10D_API, Place, RankStack, StackGroup
from jobs.pyspy import Frame
from jobs.stack_hints import DETAIL_HINT, FR_HINT, NATIVE_HINT, NCCL_HINT, NODES_HINT, RENDEZVOUS_EVIDENCE

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
            label = f"{prefix}.{name}"
            return Place("collective", f"{framework}'s {label}" if framework else label, user, frame)
    if (wait := framework_wait(frames)) is not None:
        return Place(wait.kind, wait.label, user, wait.frame, inferred=wait.inferred)
    if user is None and inner is None:
        return Place("unreadable", "no Python frame")
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
    summary = "; ".join(_phrase(g) for g in groups)
    remote = bool(world_size and world_size > len(ranks))
    symptoms: list[Symptom] = []
    why = ""
    collective = coll[0].place.text() if coll else None
    odd: list[StackGroup] = []
    # The same sentences in Chinese (jobs.hang_wording), built beside the English ones from the same groups.
    said, said_why = zh.summary(groups), ""
    said_symptoms: list[str] = []
    said_next: dict[str, str] = {}  # the items built here; the fixed hints are looked up
    said_collective = zh.place(coll[0].place) if coll else None
    if not coll and not rdv and not other and not device:
        category, rank, confidence = "unknown", None, 0.1
        next_evidence = [lost[0].place.label] if lost else []
    elif rdv and other and not coll:  # the others wait in init_process_group for the rank still before it
        category, odd = "straggler", other
        odd_ranks = sorted(r for g in other for r in g.ranks)
        waiting = sorted(r for g in rdv for r in g.ranks)
        rank, confidence = odd_ranks[0], 0.7 if len(odd_ranks) == 1 else 0.5
        why = (f"{ranks_text(waiting)} wait in {rdv[0].place.label} for every rank to join the process group, and "
               f"{ranks_text(odd_ranks)} {'has' if len(odd_ranks) == 1 else 'have'} not called it yet.")
        said_why = zh.before_init(waiting, odd_ranks, rdv[0].place.label)
        next_evidence = [_look_at(odd[0])]
        said_next[next_evidence[0]] = zh.look_at(odd[0])
    elif rdv:
        category, rank, confidence = "rendezvous", None, 0.7
        missing = sorted(set(range(world_size or 0)) - set(ranks))
        if missing:
            summary += f"; WORLD_SIZE is {world_size} but ranks {span(missing)} are not here: they must join from other nodes"
            said += zh.rendezvous_missing(world_size, missing)
        next_evidence = RENDEZVOUS_EVIDENCE + ([NODES_HINT] if remote else [])
        odd = rdv
    elif coll and other:
        category = "straggler"
        odd = other
        odd_ranks = sorted(r for g in other for r in g.ranks)
        waiting = sorted(r for g in coll for r in g.ranks)
        rank = odd_ranks[0]
        confidence = 0.8 if len(odd_ranks) == 1 else 0.6 if len(odd_ranks) < len(waiting) else 0.4
        why = (f"{ranks_text(waiting)} only wait: a collective completes once every rank has called it, and "
               f"{ranks_text(odd_ranks)} {'has' if len(odd_ranks) == 1 else 'have'} not.")
        said_why = zh.straggler(waiting, odd_ranks)
        symptoms = [Symptom("collective_wait", g.ranks, _phrase(g)) for g in coll]
        said_symptoms = [zh.phrase(g) for g in coll]
        next_evidence = [_look_at(odd[0]), DETAIL_HINT]
        said_next[next_evidence[0]] = zh.look_at(odd[0])
    elif device and other and not coll:
        category, odd = "straggler", other
        odd_ranks = sorted(r for g in other for r in g.ranks)
        syncing = sorted(r for g in device for r in g.ranks)
        rank, confidence = odd_ranks[0], 0.4
        why = (f"{ranks_text(syncing)} wait on their GPU: with NCCL that is where a rank waits for a collective a "
               f"peer has not joined, and {ranks_text(odd_ranks)} {'is' if len(odd_ranks) == 1 else 'are'} not on the "
               "GPU at all. A CUDA sync alone cannot tell that from a long kernel of their own: Flight Recorder can.")
        said_why = zh.gpu_straggler(syncing, odd_ranks)
        next_evidence = [FR_HINT, NATIVE_HINT]
    elif device and not coll:
        category, rank, confidence = "unknown", None, 0.2
        summary += (": every rank waits on its GPU (a CUDA sync); that is a long kernel of its own or a collective NCCL "
                    "runs on the device that a peer has not joined, and Python frames cannot tell which")
        said += zh.EVERY_RANK_ON_ITS_GPU
        next_evidence = [FR_HINT, NATIVE_HINT, NCCL_HINT]
    elif len(coll) == 1 and coll[0].place.inferred and not other and not lost:
        category, rank, confidence = "unknown", None, 0.2
        summary += (": DDP's gradient all-reduce waits inside backward, and so does a long backward pass; the Python "
                    "frames cannot tell which. `traindoc hang --native` (it pauses each rank for a moment) shows "
                    "c10d::Reducer / Work::wait frames when it is the all-reduce")
        said += zh.BACKWARD_UNDECIDED
        next_evidence = [NATIVE_HINT, FR_HINT, DETAIL_HINT]
    elif len(coll) > 1:
        category = "collective_mismatch"
        sizes = sorted(len(g.ranks) for g in coll)
        minority = [g for g in coll if len(g.ranks) == sizes[0]]
        odd = minority if sizes[0] < sizes[-1] else coll[1:]
        rank = odd[0].ranks[0] if len(odd) == 1 and len(odd[0].ranks) == 1 else None
        confidence = 0.7 if rank is not None else 0.5
        majority = next(g for g in coll if g not in odd)
        collective, said_collective = majority.place.text(), zh.place(majority.place)
        why = (f"every rank must call the same collectives in the same order; {ranks_text(majority.ranks)} wait in "
               f"{majority.place.text()} for ranks that called something else.")
        said_why = zh.mismatch(majority.ranks, majority.place)
        symptoms = [Symptom("collective_wait", majority.ranks, _phrase(majority))]
        said_symptoms = [zh.phrase(majority)]
        next_evidence = [DETAIL_HINT, FR_HINT]
    elif coll and not lost:
        category, rank = ("unknown", None) if remote else ("network", None)
        confidence = 0.2 if remote else 0.3
        if remote:
            summary += f"; the other {(world_size or 0) - len(ranks)} ranks run on other nodes: one of them may be elsewhere"
            said += zh.remote((world_size or 0) - len(ranks))
            next_evidence = [NODES_HINT, FR_HINT, NCCL_HINT]
        elif coll[0].place.label.rsplit(".", 1)[-1] in POINT_TO_POINT:
            category, confidence = "collective_mismatch", 0.6
            summary += (": every rank waits in the same point-to-point call: each waits for a peer that is itself "
                        "waiting, a deadlock in the order of sends and receives (both sides receiving first), not a "
                        "network fault")
            said += zh.P2P_DEADLOCK
            next_evidence = [DETAIL_HINT, FR_HINT]
        else:
            summary += ": every rank is in the same collective, so none is missing; the collective itself does not complete"
            said += zh.SAME_COLLECTIVE
            next_evidence = [FR_HINT, NCCL_HINT, DETAIL_HINT, NATIVE_HINT]
    elif coll:
        category, rank, confidence = "unknown", None, 0.3
        odd = lost
        summary += ": the unreadable rank may be the one the others wait for"
        said += zh.UNREADABLE_MAY_BE_IT
        next_evidence = [lost[0].place.label, FR_HINT]
    else:
        category, rank, confidence = "unknown", None, 0.2
        summary += ": no rank is inside a collective, so this looks less like a distributed hang than slow work on every rank"
        next_evidence = [NATIVE_HINT, "the job's log: the last line each rank printed"]
        said += zh.NO_COLLECTIVE
        said_next[next_evidence[1]] = zh.JOB_LOG
    lead = odd[0] if odd else (coll[0] if coll else groups[0])
    root = RootCause(category, rank, summary, host=lead.hosts[0] if len(lead.hosts) == 1 else None,
                     evidence=_evidence(lead, by_rank), where=_where(lead), confidence=confidence)
    diagnosis = JobDiagnosis(kind="hang", root_cause=root, symptoms=symptoms, timeline=[], ranks=ranks,
                             why_consequences=why, collective=collective, next_evidence=next_evidence,
                             search_lines=[summary],
                             wording={"zh": zh.wording(said, said_why, zh.items(next_evidence, said_next), said_symptoms,
                                                       said_collective)})
    return HangSnapshot(diagnosis, groups, source, job)





def _look_at(group: StackGroup) -> str:
    """The straggler's next step: why it is still where it is."""
    many = len(group.ranks) > 1
    pid = group.pids[0] if group.pids else "PID"
    return (f"why {ranks_text(group.ranks)} {'are' if many else 'is'} still in {group.place.text()}: its full stack "
            f"(`py-spy dump --pid {pid} --native`), its log, the data or file system it reads")


def _phrase(group: StackGroup) -> str:
    many = len(group.ranks) > 1
    if group.place.kind == "unreadable":
        return f"{ranks_text(group.ranks)}: stack not read ({group.place.label})"
    verb = ("wait in" if many else "waits in") if group.place.kind != "elsewhere" else ("are in" if many else "is in")
    return f"{ranks_text(group.ranks)} {verb} {group.place.text()}"


def _evidence(group: StackGroup, by_rank: dict[int, RankStack]) -> list[str]:
    if group.place.kind == "unreadable" or not group.ranks:
        return [group.place.label]
    stack = by_rank[group.ranks[0]]
    frames = [f for f in stack.frames if f.kind != "native"] or list(stack.frames)
    user = [f for f in frames if f.kind == "user"]
    shown = ([frames[0]] if frames and frames[0].kind != "user" else []) + user
    return [f"rank {stack.rank}: {f.text()}" for f in shown[:6]]


def _where(group: StackGroup) -> str | None:
    place = group.place
    return place.user.where if place.user else (place.inner.text() if place.inner else None)
