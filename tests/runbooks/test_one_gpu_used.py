"""A multi-GPU job that runs on one GPU only is its own kind (runbook one_gpu_used, issue 37): the job goes on, no
error, and the asker says that one GPU works while the others stay idle. Its neighbours keep their runbooks: a job
that stops with one GPU at 100% and another at 0% is a hang, a slow job on every GPU is slow training, a machine
with one GPU is no failure, two ranks on one GPU is NCCL's duplicate GPU. The first fix follows what runs: a vLLM
engine gets its tensor-parallel size, a model split with device_map is loaded onto each process's own GPU.

"卡" is also the word for a GPU card: "只有一张卡在跑" (only one card is running) says nothing about a hang, while
"程序卡在这里" (the program is stuck here) does.

The reports are written for these tests; the registry and runbooks are the real ones, end to end on the shared index.
"""

from __future__ import annotations

from typing import Any

import pytest
from runbook_messages import assert_a_line_per_message, assert_picks

from agent.leads import LeadEvidence, decide
from jobs.diagnosis import HANG_WORDS
from runbooks.catalog import runbooks
from runbooks.registry import kinds
from tests.clikit import ask_json, lead_kind

KIND = "one_gpu_used"

LINES = [  # one real-shaped line per message of the front matter: the Hugging Face example scripts' summary
    "12/07/2026 10:12:01 - WARNING - __main__ - Process rank: 0, device: cuda:0, n_gpu: 1, distributed training: "
    "False, 16-bits training: False",
]

REPORTS = [
    "only one of my 4 GPUs is used when I train with the HF Trainer",
    "DDP only 1 gpu works problem. i'm training yolov8 with ddp on rtx3090 x 4",
    "Training runs fine but the other 3 GPUs are idle the whole time",
    "训练时只有一张卡在跑，其他卡利用率都是0",
    "单机多卡训练，只有GPU0这张卡的利用率100%，其他卡GPU利用率=0%，如何修复",
    "我在使用两块GPU训练时，一块正常，另一块GPU的利用率极低接近0，请问这是正常的么？",
    "[BUG] vllm多卡启动显示成功，但是实际上只有一张显卡被占用",
]

NOT_THIS_KIND = [
    # the job stops: a rank spins in a collective (100%) while another never joins (0%)
    "单机多卡训练时卡住，不报错也不继续训练，一卡利用率100% 另一卡0%",
    "Training hangs after epoch 3: GPU 0 at 100% and the other GPUs at 0%, no log output",
    # a machine with one GPU, and slowness on all of them
    "I have only one GPU. How do I run the training?",
    "我电脑只有一个GPU，训练很慢",
    "training is slow, GPU utilization is only 30% on all 8 GPUs",
]


def _lead(text: str) -> Any:
    lang = "zh" if any("\u4e00" <= ch <= "\u9fff" for ch in text) else "en"
    return decide(LeadEvidence(text, None, [], lang))


def test_the_message_has_a_line_here_and_both_languages_list_the_same_ones() -> None:
    assert_a_line_per_message(KIND, LINES)
    assert_picks(KIND, LINES)


def test_the_summary_line_alone_leads_nothing_a_healthy_single_gpu_run_prints_it_too() -> None:
    assert kinds()[KIND].generic == {"distributed training: False"}
    assert _lead(LINES[0]) is None


@pytest.mark.parametrize("report", REPORTS)
def test_a_report_that_says_one_gpu_works_and_the_others_idle_leads_with_it(report: str) -> None:
    lead = _lead(report)
    assert lead is not None and lead.kind == KIND and lead.rule == "stated", lead


@pytest.mark.parametrize("report", NOT_THIS_KIND)
def test_a_hang_a_single_gpu_machine_and_slowness_everywhere_are_not_this_kind(report: str) -> None:
    lead = _lead(report)
    assert lead is None or lead.kind != KIND, lead


def test_the_hang_on_one_busy_gpu_is_the_collective_runbook() -> None:
    lead = _lead(NOT_THIS_KIND[0])
    assert lead is not None and lead.kind == "collective_timeout", lead


def test_a_card_that_is_running_is_no_hang_and_a_program_stuck_there_is() -> None:
    for card in ("只有一张卡在跑", "0号卡在用", "两块卡在训练"):
        assert HANG_WORDS.search(card) is None, card
    for stuck in ("程序卡在这里不动", "一直卡在第一步", "卡在 Loading checkpoint shards"):
        assert HANG_WORDS.search(stuck) is not None, stuck


@pytest.mark.parametrize(("report", "first"), [
    ("vllm serve on 4 GPUs starts, but only one GPU is used", "--tensor-parallel-size 4"),
    ("I load the model with device_map='auto' on 4 GPUs but only one GPU is busy at a time",
     "PartialState().local_process_index"),
    ("only one of my 4 GPUs is used when I train with the HF Trainer", ""),  # the runbook's own order
])
def test_what_runs_picks_the_first_fix(report: str, first: str) -> None:
    lead = _lead(report)
    assert lead is not None and lead.kind == KIND, lead
    assert lead.fix == first, lead.fix
    if first:  # a fragment of one of the runbook's own fixes
        assert any(first in "\n".join(item.code) for item in runbooks()[(KIND, "en")].items["fixes"]), first


def test_both_languages_carry_the_same_commands() -> None:
    def blocks(lang: str) -> list[str]:
        parts = runbooks()[(KIND, lang)].body.split("```")
        return parts[1::2]
    assert blocks("en") == blocks("zh")


@pytest.mark.usefixtures("use_shared_index")
@pytest.mark.parametrize(("question", "fix_words"), [
    ("训练时只有一张卡在跑，其他卡利用率都是0", "torchrun --nproc-per-node"),
    ("[BUG] vllm多卡启动显示成功，但是实际上只有一张显卡被占用", "--tensor-parallel-size"),
])
def test_a_report_is_answered_with_the_runbook_end_to_end(cli: Any, question: str, fix_words: str) -> None:
    answer = ask_json(cli, question)
    assert lead_kind(answer) == KIND, answer.get("lead")
    assert fix_words in answer["verdict"]["fix"], answer["verdict"]["fix"]
    assert answer["language"] == "zh"


@pytest.mark.parametrize("report", [
    "I launch with torchrun --nproc_per_node=4 train.py but only one GPU is used, the other 3 GPUs are idle",
    "用 accelerate launch --multi_gpu --num_processes 4 train.py 启动了，但只有一张卡在跑，其他卡利用率都是0",
])
def test_a_launcher_the_asker_already_uses_is_not_the_first_fix(report: str) -> None:
    from agent.lead import runbook_lead
    from agent.stated import read_setup

    lead = _lead(report)
    assert lead is not None and lead.kind == KIND, lead
    lang = "zh" if "启动" in report else "en"
    setup = read_setup([report])
    assert "a process per GPU" in setup.features
    text = runbook_lead(runbooks()[(KIND, lang)], None, lang, setup, lead)
    fixes = text.split("torch.cuda.set_device(local_rank)", 1)
    assert len(fixes) == 2 and "torchrun --nproc-per-node=4 train.py <args>" in fixes[1], "the launch comes last"
    assert "torchrun --nproc-per-node=4 train.py <args>" not in fixes[0].split("###")[-1]


def test_a_plain_python_launch_keeps_the_launcher_first() -> None:
    from agent.stated import read_setup

    setup = read_setup(["CUDA_VISIBLE_DEVICES=0,1,2,3 python train.py --bf16 and only one GPU is busy"])
    assert "a process per GPU" not in setup.features
    assert setup.already_uses("```bash\ntorchrun --nproc-per-node=4 train.py <args>\n```") == ()
