"""A log diagnosis's sentences in Chinese, for an answer given in Chinese. The English sentences are the
diagnosis's own text (its JSON, a model's tool result, an English answer) and are built in ``jobs.verdicts``;
these say the same things from the same events, with the log's own lines quoted as printed."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from jobs.diagnosis import clip, ranks_text
from jobs.events import Event

SYMPTOM_WORDS = {
    "collective_timeout": "等待集合通信超时",
    "peer_closed": "与对端的连接断开",
    "killed_by_launcher": "被启动器终止（SIGTERM）",
    "process_abort": "在集合通信失败后自行中止",
}
TIMEOUT_LEAD = "调大超时只会让下一次失败来得更晚"


def rank_names(ranks: Sequence[int]) -> str:
    """"rank 1", "rank 0 和 2", "rank 0-63": ``ranks_text`` in Chinese."""
    english = ranks_text(ranks)
    return re.sub(r"^ranks ", "rank ", english).replace(" and ", " 和 ").replace(", ", "、")


def _clock(when: datetime | None) -> str:
    return f"（{when:%H:%M:%S}）" if when else ""


def root_summary(event: Event, every: bool, raised: bool) -> str:
    who = "所有 rank" if every else (f"rank {event.rank}" if event.rank is not None else "作业")
    host = f"（{event.host}）" if event.host and not every else ""
    place = ""
    if event.where:
        place = f"在 {event.func}（{event.where}）中" if event.func and event.func != "<module>" else f"在 {event.where} "
    verb = "抛出了" if raised else "报告了"
    return f"{who}{host} {place}{verb} {clip(event.line_zh or event.line)}{_clock(event.time)}"


def symptom(category: str, ranks: Sequence[int], waited_in: str) -> str:
    if category == "launcher_summary":
        return "torchrun 的失败汇总（ChildFailedError）"
    who = rank_names(ranks) if ranks else "其他 rank"
    where = f" 在 {waited_in} 中" if waited_in else " "
    return f"{who}{where}{SYMPTOM_WORDS.get(category, category)}"


def why(rank: int | None, symptoms: Sequence[str], launcher_summary: bool) -> str:
    """``symptoms``: the Chinese symptom sentences, torchrun's own summary left out."""
    culprit = f" rank {rank} 失败" if rank is not None else "那次失败"
    said = "；".join(symptoms) if symptoms else "启动器汇总了这次失败"
    named = ("torchrun 的 “first observed failure” 只是它最先看到退出的 rank，不一定是原因。"
             if launcher_summary else "")
    gap = " " if said[:1].isascii() else ""  # a space between Chinese and a Latin word, as Chinese text sets them
    return f"随后{gap}{said}：这些都是{culprit}的后果，不是原因；{TIMEOUT_LEAD}。{named}"


NEXT_EVIDENCE = [
    "每个 rank 卡住时的栈快照：在节点上运行 `traindoc hang`（作业调用了 torch.distributed.debug.start_debug_server 时，"
    "用 `--debug-server URL`）",
    "Flight Recorder 转储：TORCH_FR_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 "
    "TORCH_FR_DUMP_TEMP_FILE=$PWD/fr/nccl_trace_rank_，然后运行 `traindoc hang --fr-dir fr/`",
    "TORCH_DISTRIBUTED_DEBUG=DETAIL（集合通信指纹：哪个 rank 调用了什么）",
    "NCCL_DEBUG=INFO（NCCL 自己看到的每个 rank 的连接）",
]


def first_timed_out(rank: int, when: datetime | None, call: str, seconds: float, others: Sequence[int],
                    other_calls: Sequence[str], limits: Sequence[float]) -> str:
    return (f"rank {rank} 最先超时{_clock(when)}，在 {call} 中（超时 {seconds:g} 秒）；此时 {rank_names(others)} 仍在"
            f"另一个进程组的 {' 和 '.join(other_calls)} 中等待（超时 {'、'.join(f'{s:g}' for s in limits)} 秒），"
            f"而 rank {rank} 从未到达那里：rank {rank} 是掉队者（它自己的集合通信没有完成：之前排队的长 GPU kernel、"
            f"它在另一个组里卡住，或在执行其他代码），其他 rank 在等它")


def mismatch(minority: Sequence[int], minority_call: str, majority_call: str, finished: str | None = None) -> str:
    said = (f"各 rank 在不同的集合通信中等待：{rank_names(minority)} 在 {minority_call} 中，其余在 {majority_call} 中："
            "各 rank 调用集合通信的种类或顺序不一致")
    if finished is None:
        return said
    done, busy = ("其余 rank", rank_names(minority)) if finished == "majority" else (rank_names(minority), "其余 rank")
    return (f"{said}；在 barrier 中等待的{done} 很可能已经跑完了循环，而 {busy} 还在训练：各 rank 的 batch 数不同"
            "（输入不均衡：对整个数据集使用同一个 DistributedSampler 并设 drop_last，或用 "
            "torch.distributed.algorithms.Join 来对齐），或者有只在部分 rank 上调用的集合通信")


def never_reached(suspects: Sequence[int], where: str, stopped: bool, waited: Sequence[int]) -> str:
    state = "，并被启动器终止" if stopped else ""
    return (f"{rank_names(suspects)} 从未到达 {where}{state}，而 {rank_names(waited)} 在那里等待并超时："
            f"{rank_names(suspects)} 是掉队者（慢、卡住或在执行其他代码）")


def died_quietly(suspects: Sequence[int], where: str, waited: Sequence[int]) -> str:
    return (f"{rank_names(suspects)} 没有报出自己的错误就停止了，而 {rank_names(waited)} 在 {where} 中与对端的连接断开："
            f"{rank_names(suspects)} 很可能已经死掉（被信号杀死：OOM killer 的 SIGKILL、段错误；启动器的控制台输出或 "
            "`dmesg -T` 会写明是哪个信号）")


def _waited(where: str, timed_out: bool) -> str:
    """"在 dist.all_reduce (train.py:9) 中超时" / "在某个集合通信中与对端的连接断开"."""
    place = f"在 {where} 中" if where else ("在某个集合通信中" if timed_out else "")
    return place + ("超时" if timed_out else "与对端的连接断开")


def none_stands_out(where: str, shown: list[int] | None = None, timed_out: bool = True) -> str:
    """``shown``: the ranks that timed out, when the logs show only some of the job's ranks."""
    who = f"这些日志中的所有 rank（{rank_names(shown)}）" if shown else "所有 rank"
    return (f"{who}都{_waited(where, timed_out)}，没有哪个 rank 与众不同：仅凭日志无法判断哪个 rank 落后"
            "（网络故障，或某个 rank 卡在同一个集合通信里）")


def one_rank_timed_out(rank: int, where: str, timed_out: bool = True) -> str:
    return (f"rank {rank} {_waited(where, timed_out)}，而这些日志里没有其他 rank：无法判断它在等哪个 rank"
            "（先失败或落后的 rank，或网络故障）")


EVERY_RANKS_LOG = ("每个 rank 的日志，而不只是这几行：`ask --log DIR` 会读取整个作业的日志（torchrun 的 --log-dir、"
                   "每个节点的文件），找出最先失败的 rank")

KILLED_BY_SIGKILL = ("被 SIGKILL 杀死，通常是内核的 OOM killer 所为：主机内存耗尽（`dmesg -T | grep -i 'killed process'` 可以看到），"
                     "否则是调度器或用户发出的")

CHECKS = {  # jobs.verdicts.root.CHECKS in Chinese
    "host_oom": [
        "在那个节点上运行 `dmesg -T | grep -i -E 'killed process|out of memory'`：OOM killer 的那一行写明了被杀的进程和它占用的内存",
        "作业自己的内存上限，而不只是机器的内存：容器里的 `cat /sys/fs/cgroup/memory.max`、Slurm 的 `--mem`/`--mem-per-cpu`、"
        "pod 的内存 limit",
        "内存被谁占用：每个 rank 都加载了整个数据集或完整的模型副本、DataLoader worker（每个 worker 预取 `prefetch_factor` 个 batch）、"
        "优化器状态或参数的 CPU 卸载（offload）",
    ],
}

RENDEZVOUS = "日志在启动后就停止了，没有任何 rank 的输出：启动器很可能在 rendezvous 阶段等待从未加入的节点（或 rank）"


def ended_without_error(last_line: str) -> str:
    return f"作业卡住时日志没有报错就结束了；最后一行是：{last_line[:160]!r}。仅凭日志无法判断每个 rank 在哪里等待"
