"""Issue 36 point 1, what tells neighbours apart: a job that stops making progress is not slow (the hang words rule the
slow-training runbook out, registry: ruled_out_by "the job hangs"), and a hang whose GPU listing shows one GPU
unreachable (NVML's "GPU is lost", nvidia-smi's ERR!, gpustat's ((Unknown Error))) is that GPU's failure, even on
consumer GPUs whose hangs are otherwise P2P's; accelerate's notice that it used DeepSpeed's value yields to the
out-of-memory the asker reports (registry: yields_to). `ask --json` over the real index (tests/conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest

from agent.stated import stated_facts
from tests.clikit import ask_json, lead_kind

pytestmark = pytest.mark.usefixtures("use_shared_index")


@pytest.mark.parametrize(("question", "kind"), [
    # a job that stops with one GPU busy is a hang, not slow training
    ("4-GPU DDP training is stuck after 3 epochs: GPU 0 shows 100% utilization, GPU 1 sits at 0%, nothing is printed",
     "collective_timeout"),
    ("多卡训练跑到一半卡住了，一张卡利用率 100%，另一张 0%，也没有报错", "collective_timeout"),
    # a job that is only slow is still slow training
    ("training is very slow: GPU utilization stays around 40% and every step takes 2 s", "slow_training"),
    # a hang whose GPU listing shows a GPU lost is that GPU's fault, on consumer GPUs too
    ("8x RTX 3090 DDP job hangs in epoch 2; nvidia-smi shows ERR! in GPU 5's row and the other GPUs at 100%",
     "gpu_hardware_fault"),
    ("四张3090多卡训练卡住了，gpustat 显示 [1] ((Unknown Error)) | ?°C, ? %，其他卡 100%", "gpu_hardware_fault"),
    ("the job hung and now nvidia-smi prints: Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error",
     "gpu_hardware_fault"),
    # consumer GPUs that hang with every GPU listed are still P2P's
    ("DDP on four RTX 4090 hangs at the first all_reduce, every GPU at 100% in nvidia-smi", "consumer_gpu_p2p"),
])
def test_what_leads(cli: Any, question: str, kind: str) -> None:
    answer = ask_json(cli, question)
    assert lead_kind(answer) == kind, answer["lead"]


def test_the_hang_words_state_that_the_job_hangs_and_plain_slowness_does_not() -> None:
    assert "the job hangs" in stated_facts("训练卡住了，不再输出")
    assert "the job hangs" in stated_facts("the run froze after step 300")
    assert "the job hangs" not in stated_facts("training got slower after step 300")


@pytest.mark.parametrize(("text", "slow"), [
    ("  0%|          | 0/180060 [00:00<?, ?it/s]", False),  # a bar that never moved measured no rate
    ("loss 2.1:  3%|▎ | 12/400 [00:33<18:16,  1.29it/s]", False),  # a rate in a healthy bar is no complaint
    ("we get 2 it/s on 8 GPUs and expected 10", True),
    ("each step takes 14 s/it", True),
])
def test_only_a_rate_the_asker_talks_about_signals_slow_training(text: str, slow: bool) -> None:
    from runbooks.registry import signalled

    assert (signalled("slow_training", text) is not None) is slow


def test_accelerate_s_notice_yields_to_the_out_of_memory_the_asker_reports(cli: Any) -> None:
    notice = ("Gradient accumulation steps mismatch: GradientAccumulationPlugin has 1, DeepSpeed config has 16. "
              "Using DeepSpeed's value.")
    assert lead_kind(ask_json(cli, f"{notice}\n然后训练还是爆显存了，4090 24G")) == "cuda_oom"
    assert lead_kind(ask_json(cli, f"{notice}\nthen the run died: CUDA out of memory")) == "cuda_oom"
