"""After the runbook's fixes come the fixes of the documents' sections about the same failure kind
(corpus/data/section_kinds.json), as advice.review shows them; a section about another kind supplies none, and the
sections keep the order retrieval gave them."""

from __future__ import annotations

import re

import pytest
from clikit import ROOT

from agent.answer import Citation
from agent.compose import compose
from agent.core import reviewed
from agent.lead import about_the_same_failure, documents_after, hang_stage, lead_with
from common.settings import Settings
from corpus.indexer import document_chunks
from corpus.kinds import answers_kind, section_kinds
from runbooks.catalog import runbooks
from runbooks.choose import for_hang, for_lines, related_kinds

TIMEOUT_004 = "故障排除指南 > 分布式训练问题 > 问题：NCCL 超时"
PORT_002 = "DeepSpeed卡住问题解决方案 > 常见错误及解决方案 > 错误2: 端口被占用"


def _seed_citation(n: int, section: str) -> Citation:
    chunk = next(c for c in document_chunks(sorted((ROOT / "corpus").glob("00*.txt")), Settings()) if c.section == section)
    return reviewed(Citation(n=n, source=chunk.source, section=section, chunk_id=chunk.chunk_id, score=1.0, text=chunk.text),
                    "en", [])


def test_the_same_kinds_fixes_follow_the_runbook_and_another_kinds_do_not() -> None:
    book = runbooks()[("collective_timeout", "en")]
    port, timeout = _seed_citation(2, PORT_002), _seed_citation(3, TIMEOUT_004)
    cited = lead_with(book, [port, timeout], "en", limit=5)
    assert [c.section for c in cited[1:]] == [PORT_002, TIMEOUT_004]  # as retrieval ranked them
    body = compose("NCCL timeout during training", cited, [], False, [], [], lead="LEAD", lead_kind="collective_timeout")
    more = body.split("More fixes from the documents on the same failure", 1)
    assert len(more) == 2, body
    numbers = {int(n) for n in re.findall(r"from \[(\d+)\]", more[1])}
    assert numbers == {3}, more[1]  # the timeout section; the port section ([2]) supplies no fix
    assert "NCCL_TIMEOUT=" not in "".join(re.findall(r"```.*?```", more[1], re.S))  # corrected before shown
    assert "export NCCL_DEBUG=INFO" in more[1]


def test_a_kind_no_section_answers_adds_no_document_fixes() -> None:
    book = runbooks()[("straggler", "en")]
    cited = lead_with(book, [_seed_citation(2, TIMEOUT_004)], "en", limit=5)
    body = compose("rank 1 is a straggler", cited, [], False, [], [], lead="LEAD", lead_kind="straggler")
    assert "More fixes" not in body


def test_every_seed_section_is_placed_and_every_kind_is_a_runbook() -> None:
    kinds = {kind for kind, _ in runbooks()}
    chunks = document_chunks(sorted((ROOT / "corpus").glob("00*.txt")), Settings())
    from pathlib import PurePath

    from corpus.kinds import _table

    for chunk in chunks:
        assert (PurePath(chunk.source).stem, chunk.section) in _table(), f"{chunk.section} has no recorded kinds"
        placed = section_kinds(chunk.source, chunk.section)
        assert placed.role in ("fix", "diagnosis", "overview"), chunk.section
        assert set(placed.kinds) <= kinds, (chunk.section, placed.kinds)
    assert answers_kind("corpus/renderings/en/004_f7d4acab9feaf887.md", TIMEOUT_004, "collective_timeout")


ARCH_000 = "错误排查指南 > 错误1: CUDA兼容性问题（主要问题） > 解决方案 > 方案1：升级PyTorch（推荐）"
TUNING_004 = "故障排除指南 > 训练问题 > 问题：训练极其缓慢"


def test_kinds_sharing_a_specific_triage_category_are_related_and_broad_ones_relate_nothing() -> None:
    assert "arch_mismatch" in related_kinds("extension_arch")  # both arch_mismatch
    assert "nan_loss" in related_kinds("fp16_loss_scale")  # both nan
    assert "bad_arguments" in related_kinds("local_rank_argument")
    assert related_kinds("wrong_device") == {"wrong_device"}  # only "exception": every kind can be one
    assert "port_in_use" not in related_kinds("cuda_oom")


def test_after_a_runbook_a_section_about_another_failure_is_not_cited_unless_it_quotes_the_error() -> None:
    """A bf16 error answered by its runbook: the seed's arch-mismatch fix is about another failure and is left out,
    so is a section about no failure kind (tuning); a section quoting the asked error always stays; a team's
    section (not recorded) is not judged."""
    book = runbooks()[("bf16_unsupported", "en")]
    arch, tuning = _seed_citation(2, ARCH_000), _seed_citation(3, TUNING_004)
    team = Citation(n=4, source="/team/docs/bf16.md", section="bf16 on V100", chunk_id="team-1", score=1.0, text="...")
    assert [c.section for c in about_the_same_failure(book, [arch, tuning, team], set())] == ["bf16 on V100"]
    assert [c.section for c in about_the_same_failure(book, [arch, tuning], {arch.chunk_id})] == [ARCH_000]
    related = runbooks()[("extension_arch", "en")]  # an extension without the GPU's arch: the same failure family
    assert [c.section for c in about_the_same_failure(related, [arch], set())] == [ARCH_000]


INIT_002 = "DeepSpeed卡住问题解决方案 > 问题描述"


@pytest.mark.parametrize(
    ("report", "kind"),
    [
        ("用预训练脚本启动时 deepspeed 一直在等，日志停在：Initializing TorchBackend in DeepSpeed with backend nccl",
         "deepspeed_init_hang"),
        ("deepspeed init hang住, 单机4卡", "deepspeed_init_hang"),
        ("my job hangs at init_process_group on the second node", "rendezvous"),
        ("训练卡在分布式初始化", "rendezvous"),
        ("training hangs after epoch 3", None),  # a hang, at no stage a runbook names
        ("deepspeed init is slow but finishes", None),  # a stage, no hang
        # A hang inside the training steps: ranks waiting in a collective one of them never reached
        ("DDP job sits there forever after the first backward, GPU util 100% on one rank, no error",
         "collective_timeout"),
        ("the job hangs in dist.barrier() before evaluation", "collective_timeout"),
        ("多卡训练过程中卡住不动，没有报错", "collective_timeout"),
        ("deepspeed init hangs; py-spy shows all_reduce", "deepspeed_init_hang"),  # the earlier stage is named first
        ("the backward pass takes forever on this model", None),  # slow, not a hang
        ("all_reduce is slow on 2 nodes", None),
        # A DeepSpeed job that hangs at no named stage is DeepSpeed's start-up hang (its first check finds the stage)
        ("用 deepspeed 和 accelerate 单机多卡训练，加载完数据后一直卡着不动，单卡没问题", "deepspeed_init_hang"),
        ("DeepSpeed job with 2 nodes just hangs, no error", "deepspeed_init_hang"),
        ("with 2 nodes it stucks at the deepspeed initialization", "deepspeed_init_hang"),  # "stucks", "stucked"
        ("training is stucked in init_process_group", "rendezvous"),
        ("deepspeed training hangs at the all_reduce", "collective_timeout"),  # a stage named: that stage's runbook
        ("deepspeed model.save_checkpoint hangs on rank 0", None),  # a later part of the run, no runbook of its own
        ("deepspeed 评估时卡住", None),
        ("deepspeed hangs after epoch 2", None),
        ("deepspeed finishes but is slow", None),  # no hang
    ],
)
def test_a_reported_hang_at_a_named_stage_is_that_stages_runbook(report: str, kind: str | None) -> None:
    book = for_hang(report)
    assert (book.kind if book else None) == kind


def test_sections_after_a_runbook_are_those_that_answer_less_other_failures_where_the_kind_is_established() -> None:
    book = runbooks()[("deepspeed_init_hang", "en")]
    init, arch = _seed_citation(2, INIT_002), _seed_citation(3, ARCH_000)
    assert [c.section for c in documents_after(book, True, [arch, init], set())] == [INIT_002]
    assert [c.section for c in documents_after(book, False, [arch, init], set())] == [ARCH_000, INIT_002]  # a likeness
    assert documents_after(book, True, [], set()) == []  # none answers: the kind alone cites nothing


def test_a_reported_hang_at_a_stage_cites_the_retrieved_sections_about_that_stage_where_none_answered() -> None:
    book = runbooks()[("deepspeed_init_hang", "en")]
    init, arch = _seed_citation(2, INIT_002), _seed_citation(3, ARCH_000)
    # nothing answered: the retrieved sections recorded about the hang's kind follow; one about another failure does not
    assert [c.section for c in documents_after(book, True, [], set(), [arch, init], named_whole=True)] == [INIT_002]
    assert documents_after(book, True, [], set(), [arch, init], named_whole=False) == []  # an error's kind: nothing
    assert documents_after(book, False, [], set(), [arch, init], named_whole=True) == []  # a likeness: nothing
    answered = documents_after(book, True, [init], set(), [arch, init], named_whole=True)
    assert [c.section for c in answered] == [INIT_002]  # what answered is what follows


@pytest.mark.parametrize(("report", "kind", "expected"), [
    ("deepspeed 一直在等，日志停在 Initializing TorchBackend in DeepSpeed with backend nccl", "deepspeed_init_hang", True),
    ("my job hangs in deepspeed.initialize on 8 GPUs", "deepspeed_init_hang", True),
    ("my job hangs in deepspeed.initialize on 8 GPUs", "collective_timeout", False),  # another runbook than the stage's
    ("deepspeed.initialize fails with a config error", "deepspeed_init_hang", False),  # no hang reported
])
def test_a_hang_stage_is_the_runbook_of_the_stage_the_report_says_it_hangs_at(report: str, kind: str, expected: bool) -> None:
    assert hang_stage(report, None, runbooks()[(kind, "en")]) is expected


def test_a_start_up_progress_line_names_its_kind_only_where_the_job_hangs_there() -> None:
    started = "[INFO] [comm.py:652:init_distributed] Initializing TorchBackend in DeepSpeed with backend nccl"
    assert for_lines(["ValueError: API key must be 40 characters long", started, "wandb: (1) Create a W&B account"]) is None
    ended_there = for_lines(["[INFO] Setting ds_accelerator to cuda", started])
    assert ended_there is not None and ended_there.kind == "deepspeed_init_hang"
    said = for_lines(["the job hangs", started, "[INFO] something else"])
    assert said is not None and said.kind == "deepspeed_init_hang"


@pytest.mark.parametrize(("report", "kind"), [
    ("跑数据集的时候会在deepspeed init时hang住", "deepspeed_init_hang"),  # "init时": no \b between t and 时
    ("swift sft --freeze_vit true ... 单卡OOM", None),  # an option's name is no hang
])
def test_hang_and_stage_words_are_bounded_by_letters_not_word_boundaries(report: str, kind: str | None) -> None:
    book = for_hang(report)
    assert (book.kind if book else None) == kind


SLOW_004 = "故障排除指南 > 训练问题 > 问题：训练极其缓慢"
PROFILING_004 = "故障排除指南 > 调试技巧 > 性能画像分析 (Performance Profiling)"  # a tip, about no failure kind
OOM_004 = "故障排除指南 > 显存问题 > 问题：显存溢出 (Out of Memory, OOM) 错误"


def test_a_runbook_that_only_reads_alike_does_not_lead_a_section_about_no_failure_kind() -> None:
    from agent.lead import Retrieved, choose

    seed = str(ROOT / "corpus" / "004_f7d4acab9feaf887.txt")
    hang_book = runbooks()[("deepspeed_init_hang", "en")]
    oom_book = runbooks()[("cuda_oom", "en")]
    assert section_kinds(seed, PROFILING_004).kinds == () and "cuda_oom" in section_kinds(seed, OOM_004).kinds
    alike = Retrieved(hang_book.source, 0.95)
    # The section answering is a profiling tip (no runbook's kind): the DeepSpeed start-up runbook that reads
    # alike does not lead it. One about a failure kind keeps the likeness rule; so does a team's own document.
    assert choose("is my training slow because of the compiler", None, [], "en", alike, 0.9, (seed, PROFILING_004)) is None
    # the training-speed section is about slow training: its runbook leads, not the one that reads alike
    slow = choose("is my training slow because of the compiler", None, [], "en", alike, 0.9, (seed, SLOW_004))
    assert slow is not None and slow[0].kind == "slow_training"
    # "memory keeps growing" says nothing that tells GPU memory from host memory: a likeness alone does not lead
    assert choose("memory keeps growing", None, [], "en", Retrieved(oom_book.source, 0.95), 0.9, (seed, OOM_004)) is None
    chosen = choose("CUDA memory keeps growing", None, [], "en", Retrieved(oom_book.source, 0.95), 0.9, (seed, OOM_004))
    assert chosen is not None and chosen[0].kind == "cuda_oom"
    team = choose("is my deepspeed training slow", None, [], "en", alike, 0.9, ("/team/notes.md", "Speed"))
    assert team is not None and team[0].kind == "deepspeed_init_hang"
    assert choose("is my training slow", None, [], "en", alike, 0.9, ("/team/notes.md", "Speed")) is None
    # A runbook named by the pasted message leads whatever section answers
    named = choose("[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", None,
                   ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"], "en", alike, 0.9,
                   (seed, SLOW_004))
    assert named is not None and named[0].kind == "cuda_oom"


def test_one_pasted_watchdog_line_is_a_timeout_of_unknown_cause_and_a_diagnosed_straggler_stays_one() -> None:
    from runbooks.choose import for_category

    watchdog = ["[rank2]:[E ProcessGroupNCCL.cpp:632] [Rank 2] Watchdog caught collective operation timeout: "
                "WorkNCCL(SeqNum=88, OpType=ALLGATHER, NumelIn=64, NumelOut=512, Timeout(ms)=600000) ran for 600042 "
                "milliseconds before timing out."]
    pasted = for_lines(watchdog)
    assert pasted is not None and pasted.kind == "collective_timeout"  # which rank was late is not on one line
    diagnosed = for_category("straggler", watchdog)  # the triage compared the ranks and found the late one
    assert diagnosed is not None and diagnosed.kind == "straggler"


NAN_004 = "故障排除指南 > 训练问题 > 问题：Loss 或梯度值为 NaN"


def test_the_runbook_of_the_kind_the_answering_section_is_about_leads_it() -> None:
    from agent.lead import choose

    seed = str(ROOT / "corpus" / "004_f7d4acab9feaf887.txt")
    assert section_kinds(seed, NAN_004).kinds[0] == "nan_loss"
    # No message, no hang, no runbook reading alike: the NaN section answers, so the NaN runbook (in the asker's
    # language) gives its fixes first, at the documents' confidence
    chosen = choose("LoRA 微调时 loss 一直是 0，grad_norm 是 nan", None, [], "zh", None, 0.93, (seed, NAN_004))
    assert chosen is not None and chosen[0].kind == "nan_loss" and chosen[0].lang == "zh" and chosen[1] == 0.93
    # Nothing answers, or a team's own section (no kind recorded), or a section about no kind: no runbook
    assert choose("loss is nan", None, [], "en", None, None, (seed, NAN_004)) is None
    assert choose("loss is nan", None, [], "en", None, 0.93, ("/team/notes.md", "NaN")) is None
    assert choose("training is slow", None, [], "en", None, 0.93, (seed, PROFILING_004)) is None


OOM_VLLM_004 = "故障排除指南 > 显存问题 > 问题：vLLM 引擎引发的 OOM"


def test_after_an_established_runbook_a_section_about_its_own_kind_comes_before_one_about_a_related_kind() -> None:
    """A vLLM KV-cache error: the vLLM OOM section (recorded about vllm_kv_cache) before the generic OOM one (about
    cuda_oom, a related kind), whatever retrieval's order; a section quoting the asked error and a team's section
    (not recorded) keep their places."""
    book = runbooks()[("vllm_kv_cache", "en")]
    generic, vllm = _seed_citation(2, OOM_004), _seed_citation(3, OOM_VLLM_004)
    team = Citation(n=4, source="/team/docs/vllm.md", section="KV cache", chunk_id="team-1", score=1.0, text="...")
    assert "cuda_oom" in related_kinds("vllm_kv_cache")
    assert [c.section for c in about_the_same_failure(book, [generic, vllm], set())] == [OOM_VLLM_004, OOM_004]
    assert [c.section for c in about_the_same_failure(book, [team, generic, vllm], set())] == \
        ["KV cache", OOM_VLLM_004, OOM_004]
    assert [c.section for c in about_the_same_failure(book, [generic, vllm], {generic.chunk_id})] == \
        [OOM_004, OOM_VLLM_004]
    assert [c.section for c in documents_after(book, False, [generic, vllm], set())] == [OOM_004, OOM_VLLM_004]


LEFTOVER_002 = "DeepSpeed卡住问题解决方案 > 常见原因 > 4. 进程残留"


def test_after_an_established_runbook_a_section_that_fixes_comes_before_one_that_only_diagnoses() -> None:
    book = runbooks()[("port_in_use", "en")]
    leftover, port = _seed_citation(2, LEFTOVER_002), _seed_citation(3, PORT_002)
    assert section_kinds(leftover.source, LEFTOVER_002).role == "diagnosis"
    assert section_kinds(port.source, PORT_002).role == "fix"
    assert [c.section for c in about_the_same_failure(book, [leftover, port], set())] == [PORT_002, LEFTOVER_002]
    assert [c.section for c in about_the_same_failure(book, [leftover, port], {leftover.chunk_id})] == \
        [LEFTOVER_002, PORT_002]  # the section quoting the asked error keeps its place
