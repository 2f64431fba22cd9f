"""A section written for another machine is not the answer: seed 000's CUDA write-up presumes a Blackwell GPU
(recorded as data, agent/data/presumptions.json), so an RTX 3090 or an H100 is not sent to its fixes."""

from __future__ import annotations

import json

import pytest

from agent.answer import Citation
from agent.presumptions import contradicted, gpu_archs, presumed

BLACKWELL = "错误排查指南 > 错误1: CUDA兼容性问题（主要问题） > 解决方案 > 方案1：升级PyTorch（推荐）"


@pytest.mark.parametrize("text, arch", [
    ("NVIDIA GeForce RTX 3090 with CUDA capability sm_86 is not compatible with the current PyTorch installation.", "sm_86"),
    ("NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible", "sm_120"),
    ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1234)", "sm_90"),
    ("device NVIDIA A100-SXM4-80GB capability 8.0", "sm_80"),
    ("torch.cuda.get_device_capability() -> capability (12, 0)", "sm_120"),
])
def test_the_gpu_is_read_from_what_the_logs_and_probes_print(text, arch):
    assert arch in gpu_archs([text])


def test_the_build_list_is_not_the_gpu():
    assert gpu_archs(["The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_90."]) == set()


def test_a_blackwell_section_is_contradicted_only_by_another_gpu():
    section = Citation(1, "corpus/000_a1161a68fffab229.txt", BLACKWELL, "0" * 16, 1.0)
    other = Citation(2, "corpus/004_f7d4acab9feaf887.txt", "故障排除指南 > 安装问题 > 问题：CUDA 版本不匹配", "1" * 16, 0.9)
    assert "sm_120" in presumed(section) and not presumed(other)
    assert contradicted([section, other], {"sm_86"}) == [section]
    assert contradicted([section, other], {"sm_120"}) == []
    assert contradicted([section, other], set()) == [], "no evidence of the GPU: nothing is contradicted"


@pytest.mark.usefixtures("use_shared_index")
def test_an_rtx_3090_is_not_answered_with_the_blackwell_write_up(cli):
    question = ("UserWarning: NVIDIA GeForce RTX 3090 with CUDA capability sm_86 is not compatible with the current "
                "PyTorch installation.\nThe current PyTorch install supports CUDA capabilities sm_37 sm_50 sm_60 sm_70.")
    answer = json.loads(cli("ask", "--json", "--no-probes", question).stdout)
    assert not any(c["source"].endswith("000_a1161a68fffab229.txt") and "CUDA兼容性" in c["section"]
                   for c in answer["citations"]), answer["citations"]
    blackwell = json.loads(cli("ask", "--json", "--no-probes", question.replace("RTX 3090", "RTX 5090")
                               .replace("sm_86", "sm_120")).stdout)
    assert any(c["source"].endswith("000_a1161a68fffab229.txt") for c in blackwell["citations"])
