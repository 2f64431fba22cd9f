"""A log diagnosis's sentences in Chinese, for an answer given in Chinese. The English sentences are the
diagnosis's own text (its JSON, a model's tool result, an English answer) and are built in ``jobs.triage``;
these say the same things from the same events, with the log's own lines quoted as printed."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from jobs.diagnosis import ranks_text
from jobs.events import Event

SYMPTOM_WORDS = {
    "collective_timeout": "在集合通信中等待超时",
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
    return f"{who}{host} {place}{verb} {event.line[:240]}{_clock(event.time)}"


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
