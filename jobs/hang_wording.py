"""A hang diagnosis's sentences in Chinese, for an answer given in Chinese. The English sentences are the
diagnosis's own text (its JSON fields, a model's tool result, an English answer), built in ``jobs.stacks`` and
``jobs.hang``; these say the same things from the same groups and findings, beside them. Function names,
file:line, commands and environment variables stay as they are; an error message quoted from py-spy or a
server stays as printed. Terms follow ``jobs.wording``: rank, 集合通信, 等待, rendezvous, kernel.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING

from jobs import stack_hints as english
from jobs.diagnosis import span
from jobs.wording import rank_names

if TYPE_CHECKING:
    from jobs.diagnosis import JobDiagnosis
    from jobs.flight_recorder import FrFinding
    from jobs.places import Place, StackGroup

# -- where a group is --------------------------------------------------------------------------------------------

# The place labels jobs.stacks.locate and jobs.framework_waits write, in the order they are tried: the first
# pattern that matches the whole label says it. A label none matches is a name (dist.barrier, load_shard) or a
# quoted error, and stays as it is.
LABELS = (
    (r"backward, where (.+)'s gradient all-reduce waits", "backward（{0} 的梯度 all-reduce 在其中等待）"),
    (r"(.+)'s gradient all-reduce in backward", "backward 中 {0} 的梯度 all-reduce"),
    (r"(.+)'s gradient all-reduce", "{0} 的梯度 all-reduce"),
    (r"a collective in backward", "backward 中的集合通信"),
    (r"a collective", "集合通信"),
    (r"(.+)'s collective in backward", "backward 中 {0} 的集合通信"),
    (r"(.+)'s collective", "{0} 的集合通信"),
    (r"a CUDA synchronisation \(waiting on the GPU\)", "CUDA 同步（等待 GPU）"),
    (r"(\S+) waits for its rendezvous", "{0} 在等待 rendezvous"),
    (r"no Python frame", "没有 Python 栈帧"),
    (r"(.+)'s (\S+)", "{0} 的 {1}"),  # FSDP's dist.all_gather_single
)


def _translated(table: Sequence[tuple[str, str]], text: str) -> str:
    """The Chinese of the first (pattern, template) row whose pattern matches all of ``text``, else the text."""
    for pattern, chinese in table:
        found = re.fullmatch(pattern, text)
        if found:
            return chinese.format(*found.groups())
    return text


def label(text: str) -> str:
    return _translated(LABELS, text)


def place(where: Place) -> str:
    """``Place.text()`` in Chinese."""
    if where.kind == "unreadable":
        return label(where.label)
    if where.kind in ("collective", "rendezvous", "device"):
        said = label(where.label)
        if where.user is None:
            return f"{said}，位于 {where.inner.text()}" if where.inner else said
        if said.endswith("）"):  # "CUDA 同步（等待 GPU，train.py:19）", not two brackets in a row
            return f"{said[:-1]}，{where.user.where}）"
        return f"{said}（{where.user.where}）"
    if where.user is None:
        return where.inner.text() if where.inner else "?"
    text = f"{where.user.function}（{where.user.where}）"
    if where.inner is not None and where.inner != where.user:
        text += f"，当前在 {where.inner.text()} 内"
    return text


def phrase(group: StackGroup) -> str:
    """``jobs.stacks._phrase`` in Chinese: "rank 0 和 2 在 dist.barrier（train.py:77）中等待"."""
    who = rank_names(group.ranks)
    if group.place.kind == "unreadable":
        return f"{who}：未能读取栈（{label(group.place.label)}）"
    if group.place.kind == "elsewhere":
        return f"{who} 正在执行 {place(group.place)}"
    return f"{who} 在 {_spaced(place(group.place))}中等待"


def _spaced(text: str) -> str:
    """``text`` and the space Chinese text sets after a Latin word (none after a Chinese character or bracket)."""
    return text + " " if text[-1:].isascii() else text


def summary(groups: Sequence[StackGroup]) -> str:
    return "；".join(phrase(g) for g in groups)


# -- what the verdicts add to the summary -------------------------------------------------------------------------

def rendezvous_missing(world_size: int | None, missing: Sequence[int]) -> str:
    return f"；WORLD_SIZE 为 {world_size}，但 rank {span(missing)} 不在这里：它们须从其他节点加入"


def remote(count: int) -> str:
    return f"；其余 {count} 个 rank 在其他节点上运行：其中某个可能不在这个集合通信里"


P2P_DEADLOCK = ("：每个 rank 都在同一个点对点调用中等待：每个 rank 等待的对端自己也在等待，这是发送与接收顺序上的死锁（双方都先接收），"
                "不是网络故障")
EVERY_RANK_ON_ITS_GPU = ("：每个 rank 都在等待自己的 GPU（CUDA 同步）；这可能是它自己的长 kernel，也可能是 NCCL 在 GPU 上执行、"
                         "而某个对端尚未加入的集合通信，仅凭 Python 栈帧无法区分")
BACKWARD_UNDECIDED = ("：DDP 的梯度 all-reduce 在 backward 内部等待，耗时很长的 backward 计算看起来也一样；仅凭 Python 栈帧"
                      "无法区分。`traindoc hang --native`（会让每个 rank 暂停片刻）在确实是 all-reduce 时会显示 "
                      "c10d::Reducer / Work::wait 栈帧")
SAME_COLLECTIVE = "：所有 rank 都在同一个集合通信中，没有缺席的 rank；是这个集合通信本身没有完成"
UNREADABLE_MAY_BE_IT = "：未能读取栈的那个 rank 可能正是其他 rank 在等待的"
NO_COLLECTIVE = "：没有任何 rank 处于集合通信中，所以这不太像分布式卡死，更像每个 rank 都在做耗时的工作"


# -- why the others are not the cause -----------------------------------------------------------------------------

def straggler(waiting: Sequence[int], odd: Sequence[int]) -> str:
    return (f"{rank_names(waiting)} 只是在等待：集合通信要等每个 rank 都调用之后才会完成，而 {rank_names(odd)} "
            "还没有调用。")


def before_init(waiting: Sequence[int], odd: Sequence[int], call: str) -> str:
    return f"{rank_names(waiting)} 在 {call} 中等待所有 rank 加入进程组，而 {rank_names(odd)} 还没有调用它。"


def gpu_straggler(syncing: Sequence[int], odd: Sequence[int]) -> str:
    return (f"{rank_names(syncing)} 在等待自己的 GPU：使用 NCCL 时，rank 正是在这里等待某个对端尚未加入的集合通信，而 "
            f"{rank_names(odd)} 根本不在 GPU 上。仅凭 CUDA 同步无法把这与它们自己的长 kernel 区分开：Flight Recorder 可以。")


def mismatch(majority: Sequence[int], where: Place) -> str:
    return (f"每个 rank 都必须以相同的顺序调用相同的集合通信；{rank_names(majority)} 在 {_spaced(place(where))}中等待"
            "调用了其他操作的 rank。")


# -- what would tell more -----------------------------------------------------------------------------------------

FR_HINT = ("每个 rank 的 Flight Recorder 记录会指出各 rank 最先出现分歧的集合通信：带上 TORCH_FR_BUFFER_SIZE=2000 "
           "TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_FR_DUMP_TEMP_FILE=$PWD/fr/nccl_trace_rank_ 重新运行，然后运行 "
           "`traindoc hang --fr-dir fr/`")
NCCL_HINT = "NCCL_DEBUG=INFO（NCCL_DEBUG_SUBSYS=INIT,NET）会显示一个 rank 用的是哪种传输、在等哪个对端"
DETAIL_HINT = ("TORCH_DISTRIBUTED_DEBUG=DETAIL 会检查每个 rank 是否以相同的形状调用相同的集合通信，"
               "并指出第一个不一致的 rank")
NATIVE_HINT = "`traindoc hang --native` 会在 Python 栈帧下面显示 C++/CUDA 栈帧（在 NCCL 内部，或在 CUDA 同步中）"
NODES_HINT = ("其他节点上的 rank：在作业中启动 torch.distributed.debug.start_debug_server()，然后运行 "
              "`traindoc hang --debug-server http://RANK0_HOST:25999`，或者在每个节点上运行 `traindoc hang`")
RENDEZVOUS_EVIDENCE = [
    "每个节点启动启动器时是否使用了相同的 --nnodes、--nproc-per-node 和 rendezvous 端点"
    "（MASTER_ADDR:MASTER_PORT 或 --rdzv-endpoint）",
    "rendezvous 端点能否从每个节点访问：在每个节点上运行 `traindoc probe --port MASTER_PORT`",
]
JOB_LOG = "作业的日志：每个 rank 打印的最后一行"
MISSING_RANK_SNAPSHOT = "缺席的 rank 卡住时的栈快照（在它所在的节点上运行 `traindoc hang`）：看它在做什么"


def then_stop(kind: str, pid: int) -> str:
    """``jobs.hang._then_stop``'s last step in Chinese."""
    return (f"然后只停止这个作业：`kill -TERM {pid}`（{kind} 是它的启动器，会把 SIGTERM 转发给每个 rank）；"
            "不要按名字杀进程（pkill/killall），那会停掉节点上所有同名的作业")


def look_at(group: StackGroup) -> str:
    """The straggler's next step: why it is still where it is."""
    pid = group.pids[0] if group.pids else "PID"
    return (f"{rank_names(group.ranks)} 为什么仍在 {place(group.place)}：它的完整栈（`py-spy dump --pid {pid} --native`）、"
            "它的日志、它读取的数据或文件系统")


@cache
def _hints() -> dict[str, str]:
    return {english.FR_HINT: FR_HINT, english.NCCL_HINT: NCCL_HINT, english.DETAIL_HINT: DETAIL_HINT,
            english.NATIVE_HINT: NATIVE_HINT, english.NODES_HINT: NODES_HINT,
            **dict(zip(english.RENDEZVOUS_EVIDENCE, RENDEZVOUS_EVIDENCE, strict=True))}


def items(english: Iterable[str], own: Mapping[str, str] | None = None) -> list[str]:
    """The next-evidence items in Chinese: those built beside the English (``own``), the fixed hints, and a
    quoted error (a rank whose stack could not be read) as printed."""
    return [(own or {}).get(item) or _hints().get(item) or label(item) for item in english]


# -- the diagnosis's wording --------------------------------------------------------------------------------------

def wording(root: str, why: str = "", next_items: Sequence[str] = (), symptoms: Sequence[str] = (),
            collective: str | None = None) -> dict[str, str]:
    """``JobDiagnosis.wording["zh"]``: what jobs.render and `traindoc hang` show in Chinese ("collective" is the
    collective's place, for `traindoc hang`)."""
    said = {"root": root, "why": why, "next": "\n".join(next_items), "symptoms": "；".join(symptoms),
            "collective": collective or ""}
    return {key: value for key, value in said.items() if value}


def add_symptom(diagnosis: JobDiagnosis, chinese: str) -> None:
    """After ``diagnosis.symptoms.append(...)``: the Chinese symptoms keep saying all of them."""
    own = diagnosis.wording.setdefault("zh", {})
    own["symptoms"] = f"{own['symptoms']}；{chinese}" if own.get("symptoms") else chinese


def stuck_in_kernel(pids: str, seconds: float) -> str:
    return (f"pid {pids} 在 {seconds:g} 秒内没有响应对 /proc 的读取：卡在内核中（D 状态，常见于 GPU 驱动调用）；"
            "以 root 身份运行 `cat /proc/PID/stack` 可以看到卡在哪里")


def no_workers(kind: str, pid: int, nnodes: str | None, target: str | None, inner: str | None) -> str:
    """``jobs.hang._no_workers``'s summary: a launcher that started no rank."""
    waits = (f"在 {target} 的 rendezvous 中" if target else "在 rendezvous 中") + "等待"
    text = f"{kind}（pid {pid}）在运行，但还没有启动任何 worker：它{waits}" + (f"其他节点（--nnodes {nnodes}）" if nnodes else "")
    return text + (f"；它的栈在 {inner}" if inner else "")


# -- Flight Recorder ----------------------------------------------------------------------------------------------

def flight_recorder(finding: FrFinding) -> str:
    """``FrFinding.summary`` (jobs.flight_recorder.describe) in Chinese, from the finding's fields."""
    label_ = finding.collective or "?"
    expected = finding.expected_ranks or finding.ranks
    joined = [r for r in expected if r not in finding.missing_ranks and r not in finding.mismatched]
    if finding.missing_ranks:
        lasts = "；".join(f"rank {o.rank} 最后一次是 {o.name} #{o.seq}" for o in finding.last_ops
                         if o.rank in finding.missing_ranks)
        return (f"{_ranks(joined)} 进入了 {label_}；{_ranks(finding.missing_ranks)} 从未加入"
                + (f"（{lasts}）" if lasts else ""))
    # describe() names the first bad collective's ranks the same way with or without a mismatch; the summary's
    # first words are the one mark of a bad collective that no rank called differently (the analyzer's pass_check)
    if finding.mismatched or finding.summary.startswith("ranks diverge at"):
        name = label_.split(f" #{finding.seq}")[0]
        others = "".join(f"；rank {r} 调用了 {v}" for r, v in sorted(finding.mismatched.items()))
        return f"各 rank 在 {label_} 处出现分歧：{_ranks(joined)} 调用了 {name}{others}"
    pending = [o for o in finding.last_ops if o.state != "completed"]
    if not pending or finding.collective is None:
        return "每个 rank 记录的集合通信都匹配，并且都已完成"
    states = {o.state for o in pending}
    one = len(finding.last_ops) == 1
    if states == {"scheduled"} and len(pending) == len(finding.last_ops):
        what = ("已入队但从未开始：排在它之前的 GPU 工作还没有完成" if one else
                "在每个 rank 上都已入队，但在任何 rank 上都没有开始：排在它之前的 GPU 工作还没有完成")
    elif "started" in states:
        what = "已经开始但没有完成：各 rank 都在其中，是它们之间的传输停滞了"
    else:
        what = "没有完成"
    lead = (f"rank {finding.last_ops[0].rank} 的转储止于 {label_}" if one
            else f"每个 rank 的转储在 {label_} 之前都一致")
    return f"{lead}，该集合通信{what}" + (f"（调用位置 {finding.where}）" if finding.where else "")


def last_op(rank: int, name: str, seq: int, state: str, where: str | None) -> str:
    """A rank's last recorded collective: "rank 1：最后一次是 gloo:all_reduce #3（completed），位于 train.py:18"."""
    return f"rank {rank}：最后一次是 {name} #{seq}（{state}）" + (f"，位于 {where}" if where else "")


def _ranks(ranks: Sequence[int]) -> str:
    return rank_names(ranks) if ranks else "没有 rank"


# -- `traindoc hang`'s own labels --------------------------------------------------------------------------------

SOURCES = (
    (r"py-spy on (.+)", "{0} 上的 py-spy"),
    (r"debug server (.+)", "debug server {0}"),
    (r"Flight Recorder dumps in (.+)", "{0} 中的 Flight Recorder 转储"),
    (r"(\d+) ranks behind (.+)", "{1} 后面的 {0} 个 rank"),
    (r"ranks of (.+)", "{0} 的各个 rank"),
)


def source(text: str) -> str:
    """Where a snapshot came from, and which job (jobs.hang, jobs.procs), in Chinese."""
    return _translated(SOURCES, text)

