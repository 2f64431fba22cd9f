"""Kinds an asker states in prose, with no error pasted (issue 36 point 3, issue 37):

- a machine without internet that cannot download weights from the Hugging Face Hub ("离线状态下不能链接hugingface
  下载权重", "no internet ... download the model weights"): hf_hub_access, even with the name misspelt. "offline" in
  the sense of offline RL or an offline evaluation says nothing about the Hub.
- zombie or leftover processes that keep GPU memory after a run was stopped ("僵尸进程，无法释放占用显存", "kill 掉训练
  之后显存一直被占用"): orphan_gpu_processes.
- more GPUs or nodes that train slower than one ("多机训的速度没有单机快", "slower than on a single GPU"):
  slow_training.
- "卡停" (stalls) is a hang like 卡住 and 卡死.

The reports are written for these tests; the registry is the real one.
"""

from __future__ import annotations

import pytest

from agent.leads import LeadEvidence, decide
from jobs.diagnosis import HANG_WORDS
from runbooks.registry import stated_kind


def _lead_kind(text: str) -> str | None:
    lang = "zh" if any("\u4e00" <= ch <= "\u9fff" for ch in text) else "en"
    lead = decide(LeadEvidence(text, None, [], lang))
    return lead.kind if lead is not None else None


@pytest.mark.parametrize(("text", "kind"), [
    ("离线状态下不能链接hugingface下载权重文件，没法运行，怎么处理呢", "hf_hub_access"),
    ("公司内网环境，离线状态下怎么加载huggingface上的模型？", "hf_hub_access"),
    ("My server has no internet, how do I download the model weights from the hub?", "hf_hub_access"),
    ("How do I use huggingface in offline mode?", "hf_hub_access"),
    ("训练进程意外中止时有僵尸进程，无法释放占用显存", "orphan_gpu_processes"),
    ("kill 掉训练之后显存一直被占用，nvidia-smi 看不到进程", "orphan_gpu_processes"),
    ("After I killed my job, GPU memory is still held by zombie processes", "orphan_gpu_processes"),
    # more GPUs or nodes, and slower than one: the job scales badly (slow_training's inter-GPU and input checks)
    ("使用多机训的速度没有单机快，4机32卡H200", "slow_training"),
    ("DDP training on 4 GPUs is even slower than on a single GPU", "slow_training"),
    ("多卡训练反而更慢了", "slow_training"),
    # what does not state either kind
    ("I trained offline and the loss was fine", None),
    ("offline RL training with hf datasets crashes with KeyError", None),
    ("offline evaluation of the model gives NaN", None),
    ("训练结束后显存正常释放了，但是 loss 不下降", None),
    ("单卡训练很正常，多卡就报错", None),
])
def test_the_asker_s_words_state_the_kind_or_none(text: str, kind: str | None) -> None:
    found = stated_kind(text)
    assert (found[0] if found else None) == kind, found


@pytest.mark.parametrize(("text", "kind"), [
    ("离线状态下不能链接hugingface下载权重文件，没法运行，怎么处理呢", "hf_hub_access"),
    ("训练进程意外中止时有僵尸进程，无法释放占用显存", "orphan_gpu_processes"),
])
def test_a_stated_kind_leads_when_nothing_is_quoted(text: str, kind: str) -> None:
    assert _lead_kind(text) == kind


def test_a_stall_is_a_hang() -> None:
    assert HANG_WORDS.search("save_checkpoint 时有概率卡停整个训练过程") is not None
    assert _lead_kind("四卡训练，save_checkpoint 时有概率卡停整个训练过程") == "collective_timeout"


def test_a_deepspeed_job_that_hangs_where_no_stage_is_named_gets_the_command_that_finds_where_ranks_wait() -> None:
    assert _lead_kind("deepspeed zero3 保存模型的时候卡住") == "collective_timeout"
    assert _lead_kind("My ZeRO-3 run hangs after a while, no error") == "collective_timeout"
