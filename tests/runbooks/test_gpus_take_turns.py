"""GPUs that take turns (one at 100% while the others wait, then the next) are one process driving a model split
by layers (device_map="auto"), the one-GPU runbook's own symptom: the asker's words say so in English and Chinese
and its fix that loads the whole model on each process's GPU comes first; a job that stops making progress while
GPUs sit at 100% and 0% is a hang, not this."""

from __future__ import annotations

from typing import Any

import pytest
from clikit import ask_json, lead_kind

pytestmark = pytest.mark.usefixtures("use_shared_index")


@pytest.mark.parametrize("question", [
    "为什么两张显卡是轮流在训练，不是一起跑？nvidia-smi 看每次都是一张跑满，另一张空闲",
    "Fine-tuning with 4 GPUs but the GPUs take turns: one at 100% utilisation, the others at 0%, step time same as one GPU",
])
def test_gpus_taking_turns_load_the_whole_model_per_process(cli: Any, question: str) -> None:
    answer = ask_json(cli, question)
    assert lead_kind(answer) == "one_gpu_used"
    assert "PartialState().local_process_index" in answer["verdict"]["fix"]


def test_a_hang_with_gpus_at_100_and_0_is_not_this(cli: Any) -> None:
    answer = ask_json(cli, "训练卡住了，没有报错，两张卡轮流跑满，loss 不再打印")
    assert lead_kind(answer) != "one_gpu_used"
