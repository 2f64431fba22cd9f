"""Follow-up or new question (agent/conversation.py), decided by what the question refers to and whether it stands
on its own, never by its length; and through ``ask()``: a follow-up inherits the earlier turn's log and diagnosis
(and says so), a new question after a log starts fresh (the log is not triaged again)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from clikit import BIN, ROOT

from agent.conversation import follow_up_context, is_follow_up, patterns, user_turn

OOM_PASTE = ("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity; "
             "75.10 GiB already allocated)")
HANG = "训练卡住了，8 卡跑到第一个 step 就不动了"
PORT = "torchrun says Address already in use"
OOM_JOB = ROOT / "tests" / "jobs" / "data" / "gpu-real" / "oom_crash" / "console.log"  # real, an H100

FOLLOW_UPS = [  # (earlier question, follow-up)
    (OOM_PASTE, "how do I fix it?"),
    (OOM_PASTE, "怎么解决？"),
    (OOM_PASTE, "这个错误怎么解决"),
    (OOM_PASTE, "and with 4 GPUs?"),
    (OOM_PASTE, "how do I fix this OOM?"),
    (OOM_PASTE, "does it also happen with ZeRO-3?"),
    (OOM_PASTE, "上面的错误是什么原因"),
    (OOM_PASTE, "why?"),
    (OOM_PASTE, "still fails"),
    (HANG, "它一直卡在 allreduce 那里是为什么"),
    (HANG, "那换成 gloo 呢？"),
    (PORT, "and how do I find which process holds it?"),
    ("RuntimeError: Address already in use", "how do I find the process?"),  # "the process": the one just named
    ("NCCL timeout: training hangs at allreduce", "what does this mean?"),
]
NEW_QUESTIONS = [
    (OOM_PASTE, "训练卡住了怎么办"),
    (OOM_PASTE, "my training hangs at the first step"),
    (OOM_PASTE, "NCCL timeout at allreduce, why?"),
    (OOM_PASTE, "RuntimeError: Address already in use"),
    (OOM_PASTE, "我的 loss 变成 NaN 了"),
    (OOM_PASTE, "what GPUs does traindoc support?"),
    (HANG, "显存不足怎么办"),
    (HANG, "how do I fix it? torch.OutOfMemoryError: CUDA out of memory"),  # points back, but brings its own error
    ("how do I fix it?", "how do I fix it?"),  # nothing before it says what "it" is: the first question is new
    # a long follow-up is still a follow-up, and a short new question is still new (length decides nothing)
]


@pytest.mark.parametrize(("earlier", "question"), FOLLOW_UPS)
def test_follow_ups_continue_the_earlier_turn(earlier: str, question: str) -> None:
    context = follow_up_context(question, [{"role": "user", "content": earlier}])
    assert context is not None and context.question == earlier


@pytest.mark.parametrize(("earlier", "question"), NEW_QUESTIONS)
def test_self_contained_questions_start_fresh(earlier: str, question: str) -> None:
    history = [] if earlier == question else [{"role": "user", "content": earlier}]
    assert follow_up_context(question, history) is None


def test_length_decides_nothing() -> None:
    long_follow_up = "thanks, but I already tried halving the batch size and enabling gradient checkpointing, " \
                     "and it still fails at the same place after a few hundred steps: what else can I try?"
    assert len(long_follow_up) > 100
    assert follow_up_context(long_follow_up, [{"role": "user", "content": OOM_PASTE}]) is not None
    assert len("显存不足怎么办") < 10
    assert follow_up_context("显存不足怎么办", [{"role": "user", "content": HANG}]) is None


def test_a_question_with_its_own_log_starts_fresh() -> None:
    assert follow_up_context("how do I fix it?", [{"role": "user", "content": OOM_PASTE}], has_own_log=True) is None


def test_a_chain_keeps_the_question_log_and_diagnosis_that_started_it() -> None:
    history = [
        user_turn("why did it crash?", log_errors=["torch.OutOfMemoryError: CUDA out of memory"], log_name="a.log"),
        {"role": "assistant", "content": "…", "diagnosis": "oom on rank 1"},
        user_turn("how do I fix it?"),
        {"role": "assistant", "content": "…"},
    ]
    context = follow_up_context("and with ZeRO-3?", history)
    assert context is not None
    assert context.question == "why did it crash?" and context.log_name == "a.log"
    assert context.log_errors == ("torch.OutOfMemoryError: CUDA out of memory",)
    assert context.diagnosis == "oom on rank 1" and context.follow_ups == ("how do I fix it?",)
    # a new question in between ends the chain: its follow-up inherits no log
    history += [user_turn("训练卡住了怎么办"), {"role": "assistant", "content": "…"}]
    context = follow_up_context("为什么？", history)
    assert context is not None and context.question == "训练卡住了怎么办" and not context.has_log


def test_the_diagnosis_makes_a_follow_up_about_its_subject() -> None:
    """An upload with a vague question: the follow-up names the diagnosis' subject, which the question did not."""
    history = [user_turn("why did it crash?"), {"role": "assistant", "content": "…", "diagnosis": "oom rank 1"}]
    context = follow_up_context("is this OOM caused by the batch size?", history)
    assert context is not None
    assert not is_follow_up("is this NaN caused by the batch size?", context)


def test_patterns_are_linear() -> None:
    """No pattern nests quantifiers (the shape that backtracks exponentially)."""
    import re

    nested = re.compile(r"\([^()]*[+*][^()]*\)[+*{]")
    p = patterns()
    for pattern in (p.error_line, p.references, p.deictics, p.continuations, p.elliptical, *p.subjects.values()):
        assert not nested.search(pattern.pattern), pattern.pattern


# -- through ask() --------------------------------------------------------------------------------------------------
# In a subprocess, as a front end runs it: in-process, tests/jobs would shadow the jobs package's data.
TURNS = """
import json, sys
from pathlib import Path
from agent.conversation import assistant_turn, user_turn
from agent.core import Question, build_troubleshooter
from agent.logs import read_log
troubleshooter, history, out = build_troubleshooter(), [], []
for turn in json.load(sys.stdin):
    reading = read_log(Path(turn["log"]), turn["q"]) if turn.get("log") else None
    question = Question(turn["q"], history=list(history), probes=False,
                        **({"log_head": reading.head, "log_errors": reading.errors, "job": reading.diagnosis,
                            "log_paths": (Path(turn["log"]),)} if reading else {}))
    answer = troubleshooter.ask(question)
    history += [user_turn(turn["q"], **({"log_head": reading.head, "log_errors": reading.errors,
                                         "log_name": Path(turn["log"]).name, "log_paths": [turn["log"]]} if reading else {})),
                assistant_turn(answer)]
    out.append({"answer": answer.answer, "sources": [c.source for c in answer.citations],
                "chunks": [c.chunk_id for c in answer.citations], "error_lines": answer.error_lines,
                "category": answer.diagnosis.root_cause.category if answer.diagnosis and answer.diagnosis.root_cause else None})
print(json.dumps(out))
"""


def _conversation(*turns: dict[str, str]) -> list[dict[str, Any]]:
    result = subprocess.run([str(BIN / "python"), "-c", TURNS], input=json.dumps(turns), capture_output=True,
                            text=True, cwd=ROOT, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    return list(json.loads(result.stdout))


@pytest.mark.slow
def test_follow_ups_use_the_uploaded_log_and_say_so_and_a_new_question_starts_fresh(use_shared_index: Path) -> None:
    upload, fix, zh_fix, hang = _conversation(
        {"q": "why did my training crash?", "log": str(OOM_JOB)}, {"q": "how do I fix it?"},
        {"q": "这个错误怎么解决"}, {"q": "训练卡住了怎么办"})
    assert upload["category"] == "oom" and not upload["answer"].startswith("↩")
    for answer, note in ((fix, "↩ Using the log uploaded with your earlier question (console.log)"),
                         (zh_fix, "↩ 沿用你上一个问题上传的日志（console.log）")):
        assert answer["answer"].splitlines()[0].startswith(note), answer["answer"][:200]
        assert answer["category"] == "oom"  # the whole job's triage, from the log re-read
        assert answer["sources"][0].endswith("cuda_oom.md"), answer["sources"]
    assert hang["category"] is None  # the OOM log is not triaged again for a new question
    assert "↩" not in hang["answer"] and "OutOfMemoryError" not in hang["answer"]
    assert not any("oom" in s for s in hang["sources"]), hang["sources"]


@pytest.mark.slow
def test_a_pasted_oom_then_a_hang_question_is_the_hang_and_a_fix_question_the_oom(use_shared_index: Path) -> None:
    alone, = _conversation({"q": "训练卡住了怎么办"})
    _, hang, _, fix = _conversation({"q": OOM_PASTE}, {"q": "训练卡住了怎么办"}, {"q": OOM_PASTE}, {"q": "how do I fix it?"})
    assert hang["chunks"] == alone["chunks"]  # answered exactly as if asked first
    assert "训练卡住了怎么办" not in "\n".join(hang["error_lines"]) and OOM_PASTE not in hang["answer"]
    assert fix["sources"] and fix["sources"][0].endswith("cuda_oom.md"), fix["sources"]
    assert fix["answer"].startswith("↩ Read as a follow-up to your earlier question")
