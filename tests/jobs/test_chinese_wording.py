"""A question in Chinese gets the job diagnosis in Chinese: the root cause and why the rest are consequences, from
the same events as the English sentences, the log's own lines quoted as printed. The JSON stays English."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clikit import CliRunner

from jobs.render import diagnosis_markdown
from jobs.triage import triage_paths

DATA = Path(__file__).parent / "data" / "gpu-real"
OOM = next((DATA / "oom_crash").glob("console.log*"))
ENGLISH_SENTENCES = ("consequences of", " raised ", "Then ", "lost the connection", "stopped by the launcher")


def test_chinese_diagnosis_says_root_and_consequences_in_chinese() -> None:
    diagnosis = triage_paths([OOM], "训练时显存不够，怎么办？")
    assert diagnosis is not None and diagnosis.root_cause is not None
    chinese = diagnosis_markdown(diagnosis, "zh")
    assert "rank 1 在 attention_scores（oom_crash.py:16）中抛出了 torch.OutOfMemoryError" in chinese
    assert "这些都是 rank 1 失败的后果，不是原因" in chinese and "rank 0 被启动器终止（SIGTERM）" in chinese
    assert not [s for s in ENGLISH_SENTENCES if s in chinese], chinese
    english = diagnosis_markdown(diagnosis, "en")
    assert "consequences of rank 1's failure" in english and "后果" not in english


def test_a_diagnosis_without_chinese_wording_falls_back_to_its_english() -> None:
    diagnosis = triage_paths([OOM], "why did it die")
    assert diagnosis is not None and diagnosis.root_cause is not None
    diagnosis.wording.clear()
    assert diagnosis.root_cause.summary in diagnosis_markdown(diagnosis, "zh")


@pytest.mark.usefixtures("use_shared_index")
def test_cli_answers_a_chinese_question_about_a_log_in_chinese_and_json_stays_english(cli: CliRunner) -> None:
    result = cli("ask", "--no-probes", "--log", str(OOM), "训练时显存不够，怎么办？")
    assert result.returncode == 0, result.stderr
    assert "失败的后果" in result.stdout and "consequences of" not in result.stdout
    as_json = cli("ask", "--json", "--no-probes", "--log", str(OOM), "训练时显存不够，怎么办？")
    diagnosis = json.loads(as_json.stdout)["diagnosis"]
    assert "wording" not in diagnosis and "consequences of rank 1's failure" in diagnosis["why_consequences"]


ENGLISH_TEMPLATES = (*ENGLISH_SENTENCES, "timed out first", "never reached", "is the straggler", "every rank timed out",
                     "the log stops", "a stack snapshot", "waited in different collectives", "the log ends without")
LOGS = sorted(p for p in (Path(__file__).parent / "data").rglob("*") if p.is_file() and (
    p.name.startswith("console.log") or (p.suffix == ".log" and p.parent.name in ("ds-issues", "hang"))))


@pytest.mark.parametrize("log", LOGS, ids=[f"{p.parent.name}/{p.name}" for p in LOGS])
def test_no_english_template_sentence_in_a_chinese_diagnosis(log: Path) -> None:
    """Every real job log we hold, asked about in Chinese (as a hang, too): the diagnosis's own sentences are
    Chinese; only the log's lines, quoted, stay as printed."""
    for question in ("训练为什么失败了？", "训练卡住了，为什么？"):
        diagnosis = triage_paths([log], question)
        if diagnosis is None or diagnosis.root_cause is None:
            continue
        chinese = diagnosis_markdown(diagnosis, "zh")
        quoted = "\n".join(diagnosis.root_cause.evidence)
        leaked = [s for s in ENGLISH_TEMPLATES if s in chinese and s not in quoted]
        assert not leaked, chinese


def test_an_exit_code_traindoc_explains_is_explained_in_chinese() -> None:
    """"exitcode -9" is explained by traindoc (the OOM killer, dmesg), not printed by the log: in Chinese too."""
    log = Path(__file__).parent / "data" / "ds-issues" / "oom_sigkill_minus9.log"
    diagnosis = triage_paths([log], "训练任务为什么挂了")
    assert diagnosis is not None and diagnosis.root_cause is not None
    root = diagnosis.wording["zh"]["root"]
    assert "exitcode -9 (SIGKILL)：被 SIGKILL 杀死" in root and "usually by the kernel" not in root, root
    assert "usually by the kernel's OOM killer" in diagnosis.root_cause.summary  # the English stays English
