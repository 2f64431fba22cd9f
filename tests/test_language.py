"""Without a model, traindoc's own words follow the question's language; quoted document text stays as written."""

from __future__ import annotations

import json
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from agent.compose import compose
from agent.core import Question, Troubleshooter
from common.language import LANGS, language_of, say
from common.settings import Settings
from jobs.diagnosis import JobDiagnosis, RootCause, Symptom
from jobs.render import demote_timeout_fixes, diagnosis_markdown

LANGUAGE = [
    ("训练时 NCCL 超时怎么办", "zh"),
    ("显存不足 CUDA out of memory", "zh"),
    ("checkpoint 加载失败 size mismatch", "zh"),
    ("训练 loss 变成 NaN 了怎么办", "zh"),
    ("RuntimeError: CUDA error: no kernel image is available\nTraceback (most recent call last):\n怎么解决", "zh"),
    ("why is NCCL hanging", "en"),
    ("my loss is NaN after torch.distributed.init_process_group, why?", "en"),
    ("why does my job hang at 初始化", "en"),  # one Chinese word in an English sentence
    ("How do I fix `显存不足` in torchrun", "en"),  # quoted text is not the user's prose
    ("NCCL watchdog timeout after 1800s", "en"),
    # an exception pasted into a Chinese sentence is the program's words: the asker writes Chinese
    ("LoRA 微调打开 gradient checkpointing 后报错：RuntimeError: element 0 of tensors does not require grad and does not "
     "have a grad_fn", "zh"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered 这个怎么解决", "zh"),
    ("my job on the 集群 fails with RuntimeError: CUDA error: an illegal memory access was encountered", "en"),
    # beside lines in Chinese, an English-only line is pasted output (a pip message, a warning), not the user's prose
    ("服务器上 pip 安装 deepspeed 失败\nCollecting deepspeed\n  Preparing metadata (setup.py) ... error\n"
     "  note: This error originates from a subprocess, and is likely not a problem with pip.\n求助", "zh"),
    ("My job fails at startup.\nThe log says 初始化 and then nothing happens.\nHow can I debug this?", "en"),
    ("", "en"),
]


@pytest.mark.parametrize(("text", "lang"), LANGUAGE)
def test_the_language_is_the_share_of_chinese_in_the_users_own_words(text: str, lang: str) -> None:
    assert language_of(text) == lang


def test_every_phrase_exists_in_every_language_with_the_same_fields() -> None:
    table = json.loads(resources.files("common").joinpath("data/phrases.json").read_text(encoding="utf-8"))
    assert set(table) == set(LANGS)
    fields = {lang: {k: sorted(_fields(v)) for k, v in table[lang].items()} for lang in LANGS}
    assert fields["zh"] == fields["en"]


def _fields(phrase: str) -> set[str]:
    import string

    return {name.split(".")[0] for _, name, _, _ in string.Formatter().parse(phrase) if name}


def _job() -> JobDiagnosis:
    root = RootCause("exception", 1, "rank 1 raised KeyError: 'target' in collate", evidence=["KeyError: 'target'"])
    return JobDiagnosis("log", root, symptoms=[Symptom("collective_timeout", [0], "rank 0 timed out in allreduce")])


def test_the_job_diagnosis_speaks_the_questions_language() -> None:
    zh = diagnosis_markdown(_job(), "zh")
    assert zh.startswith("### 作业日志显示") and "**根本原因（exception，rank 1）**" in zh
    assert "rank 1 raised KeyError: 'target' in collate" in zh, "traindoc's triage summary is quoted as it is"
    assert "另外还看到：rank 0 timed out in allreduce。" in zh
    assert diagnosis_markdown(_job()).startswith("### What the job's logs say")


def test_timeout_fixes_leave_a_chinese_answer_too() -> None:
    body = ("### 可能原因：NCCL 超时 [1]\n\n### 解决方法\n**1.** 来自 [1] NCCL 超时：\n\n```bash\nexport NCCL_TIMEOUT=1800\n"
            "export NCCL_DEBUG=INFO\n```\n\n### 另见\n- [2] init")
    out = demote_timeout_fixes(body, _job(), "zh")
    assert "NCCL_TIMEOUT" not in out and "export NCCL_DEBUG=INFO" in out
    assert say("timeout_left_out", "zh") in out and out.endswith("- [2] init")


@pytest.fixture(scope="module")
def offline(shared_index: Path) -> Troubleshooter:
    troubleshooter = Troubleshooter(replace(Settings.from_env({}), data_dir=shared_index))
    troubleshooter.retriever()
    return troubleshooter


def detail(body: str) -> str:
    """The answer after its verdict block (the first ``###`` section)."""
    return body[body.index("\n### ") + 1:]


def ask(offline: Troubleshooter, text: str, **kwargs: Any) -> str:
    return offline.ask(Question(text, probes=False, **kwargs)).answer


def test_a_chinese_question_gets_chinese_headings_around_the_quoted_sections(offline: Troubleshooter) -> None:
    body = ask(offline, "训练时 NCCL 超时怎么办")
    assert body.startswith("### 结论\n\n- **原因**：")  # the verdict first (agent.summary), then the detail
    assert detail(body).startswith("### 可能原因：") and "### 解决方法" in body and "**1.** 来自 [" in body
    assert "Likely cause" not in body and "Fixes" not in body and "See also" not in body
    english = ask(offline, "NCCL timeout during training, what should I do?")
    assert english.startswith("### Answer\n\n- **Cause**: ")
    assert detail(english).startswith("### Likely cause: ") and "### Fixes" in english
    assert "可能原因" not in english
    top = detail(english).split("\n", 1)[0].removeprefix("### Likely cause: ")
    assert not any("\u4e00" <= ch <= "\u9fff" for ch in top), "an English asker reads an English title (runbook or rendering)"


def test_no_match_and_the_job_diagnosis_in_chinese(offline: Troubleshooter) -> None:
    assert compose("怎么烤面包？面包烤焦了怎么办", [], [], True, ["bread"], []).startswith("**没有匹配**：")
    body = ask(offline, "我的分布式训练为什么挂了", job=_job())
    assert detail(body).startswith("### 作业日志显示") and "**根本原因（exception，rank 1" in body


@pytest.mark.parametrize(("text", "lang"), [
    ("vllm 启动报错 No available memory for the cache blocks", "zh"),  # what follows 报错 is the program's
    ("提示：Address already in use", "zh"),
    ("训练时显示 CUDA out of memory, tried to allocate 2 GiB", "zh"),
    ("I get 报错 when running the script on two nodes with deepspeed", "en"),  # the asker's own words are English
    ("NCCL timeout during training, what should I do?", "en"),
])
def test_what_follows_the_words_that_introduce_an_error_is_quoted_not_the_askers(text: str, lang: str) -> None:
    assert language_of(text) == lang


@pytest.mark.parametrize(("text", "lang"), [
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus. 训练中断了", "zh"),  # pasted, then asked
    ("CUDA error: an illegal memory access was encountered 怎么办", "zh"),
    ("Killed: begin load model 之后进程没了", "zh"),
    ("My job hangs, 请问怎么办? I tried everything and nothing works at all", "en"),  # English prose after it too
    ("load 模型时卡住", "zh"),
])
def test_a_line_that_opens_in_pasted_english_and_goes_on_in_chinese_is_chinese(text: str, lang: str) -> None:
    assert language_of(text) == lang
