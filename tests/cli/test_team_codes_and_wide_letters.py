"""Issue 40 (slow or wrong): a team's own error code no document names is said to be unknown, never answered by a
section about another code; a question typed in full-width letters (an input method's "ｈｉ") is read as the ASCII it
stands for. Run as a user runs them: `traindoc index` on a real team folder, then `ask --json`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.intake import as_meant, ascii_letters
from agent.team_codes import codes_in, unnamed_code


def test_team_codes_are_found_in_their_own_shape_only() -> None:
    assert codes_in("ERRX-5151 fabric credit exhausted; see E-90211") == ["ERRX-5151", "E-90211"]
    assert codes_in("an SM_120 GPU, an RTX-4090, UTF-16 logs, error 802, Xid 79, cuda:0") == []
    assert unnamed_code("ERRX-5151 on the gateway", ["ERRX-9999: credits ran out"]) == "ERRX-5151"
    assert unnamed_code("ERRX-5151 on the gateway", ["the runbook for ERRX 5151"]) is None
    assert unnamed_code("why is NCCL hanging", ["anything"]) is None


def _ask(cli: Any, question: str) -> dict[str, Any]:
    done = cli("ask", "--json", "--no-probes", question)
    assert done.returncode == 0, done.stderr[-600:]
    return dict(json.loads(done.stdout))


def test_a_code_no_document_names_is_said_unknown_and_one_a_document_names_is_answered(
        cli: Any, index_copy: Path, tmp_path: Path) -> None:
    team = tmp_path / "team"
    team.mkdir()
    (team / "gateway.md").write_text("# ERRX-9999: fabric credit exhausted on the storage gateway\n\nWhen the gateway "
                                     "logs ERRX-9999 its fabric credits ran out: restart it with `systemctl restart "
                                     "gw`.\n", encoding="utf-8")
    indexed = cli("traindoc", "index", str(team))
    assert indexed.returncode == 0, indexed.stderr[-600:]
    other = _ask(cli, "ERRX-5151 fabric credit exhausted")
    assert other["no_match"] and not other["citations"] and other["lead"] is None
    assert "ERRX-5151" in other["verdict"]["cause"] and "no document names" in other["verdict"]["cause"]
    known = _ask(cli, "ERRX-9999 fabric credit exhausted")
    assert not known["no_match"] and known["citations"][0]["source"].endswith("gateway.md")
    zh = _ask(cli, "网关报错 E-90211，怎么办？")
    assert zh["no_match"] and "E-90211" in zh["verdict"]["cause"] and "没有文档" in zh["verdict"]["cause"]


def test_full_width_letters_are_read_as_ascii_and_chinese_punctuation_stays() -> None:
    assert ascii_letters("ＮＣＣＬ ｔｉｍｅｏｕｔ，怎么办？") == "NCCL timeout，怎么办？"


def test_an_input_method_s_homophone_for_gpu_memory_is_read_as_gpu_memory() -> None:
    # 现存 (xiàncún) typed for 显存 (xiǎncún, GPU memory) where it runs short; 现存储 and 现存的 are other words
    assert as_meant("两块3090 微调 batch 1 fp16 怎么还是报现存不足呢") == "两块3090 微调 batch 1 fp16 怎么还是报显存不足呢"
    assert as_meant("训练时现存一直爆") == "训练时显存一直爆"
    assert as_meant("现存储空间不足") == "现存储空间不足"
    assert as_meant("现存的问题是 loss 不下降") == "现存的问题是 loss 不下降"


@pytest.mark.usefixtures("use_shared_index")
def test_a_full_width_greeting_asks_nothing_a_runbook_answers_and_a_full_width_error_is_answered(cli: Any) -> None:
    for question in ("ｈｉ", "ｏｋ"):
        assert _ask(cli, question)["no_match"] == _ask(cli, ascii_letters(question))["no_match"] is True
    wide = _ask(cli, "ＣＵＤＡ ｏｕｔ ｏｆ ｍｅｍｏｒｙ")
    assert (wide["lead"] or {}).get("kind") == (_ask(cli, "CUDA out of memory")["lead"] or {}).get("kind") == "cuda_oom"
