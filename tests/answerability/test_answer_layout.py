"""The offline answer: corrections wherever a section is quoted, fixes from the recognised problem only,
a weak match said so, and a no_match answer that still helps."""

from __future__ import annotations

import json
import re
from importlib import resources

import pytest

from advice.curated import correct, corrections
from agent.answer import Citation, FindingView
from agent.compose import compose, what_to_collect

BLACKWELL = """## 错误1: CUDA兼容性问题

Blackwell架构需要PyTorch 2.5+版本。请检查并升级：

```bash
# 注意：需要CUDA 12.4+支持Blackwell
pip install torch torchvision torchaudio --index-url https://download.pytorch.org/whl/cu124

# 或者使用conda
conda install pytorch torchvision torchaudio pytorch-cuda=12.4 -c pytorch -c nvidia
```
"""
PINNED = "For sm_120 cards:\n```bash\n  pip install torch==2.5.1+cu121 --index-url https://download.pytorch.org/whl/cu121\n```"


def _cite(n: int, section: str, text: str) -> Citation:
    """A citation as ask() hands it to the composer: its text through advice.review (agent.core.reviewed)."""
    from agent.core import reviewed

    return reviewed(Citation(n=n, source=f"runbooks/doc{n}.md", section=section, chunk_id=f"{n:016x}", score=1.0 / n,
                             text=text), "en", [])


@pytest.mark.parametrize("question", ["why does my NCCL all_reduce hang", "sm_120 is not compatible", ""])
def test_stale_blackwell_advice_is_corrected_whatever_the_question(question):
    text, applied = correct(BLACKWELL, "Guide > 错误1: CUDA兼容性问题\n" + question)
    assert [fact.code for fact in applied] == ["STALE_BLACKWELL_CUDA"]
    assert "whl/cu128" in text and "cu124" not in text
    assert "PyTorch 2.7+" in text and "CUDA 12.8+" in text and "2.5+" not in text


def test_a_correction_never_invents_a_command():
    text, _ = correct(BLACKWELL, "")
    assert "pytorch-cuda=" not in text, "no conda package exists for PyTorch 2.6+"
    conda = [line for line in text.splitlines() if "conda" in line and "或者" not in line]
    assert conda and all(line.lstrip().startswith("#") for line in conda), conda
    pinned, _ = correct(PINNED, "")
    assert "torch==2.5.1" not in pinned
    assert "  pip install torch torchvision torchaudio --index-url https://download.pytorch.org/whl/cu128" in pinned


def test_unrelated_sections_are_left_alone():
    text = "Install CUDA 12.4 and pip install torch --index-url https://download.pytorch.org/whl/cu124 on V100s."
    assert correct(text, "Guide > Setup\nhow do I install torch") == (text, [])


def test_every_curated_fact_names_its_source():
    data = json.loads(resources.files("advice").joinpath("data/curated_facts.json").read_text(encoding="utf-8"))
    for fact in data["corrections"]:
        assert fact["sources"] and all(s.startswith("https://") for s in fact["sources"])
        for rule in fact.get("lines", []) + fact.get("replace", []):
            assert rule["source"].startswith("https://")
    assert corrections()


def test_the_question_that_does_not_name_the_gpu_still_gets_the_correction_in_the_answer():
    body = compose("how do I upgrade pytorch", [_cite(1, "Guide > 错误1: CUDA兼容性问题", BLACKWELL)], [], False, [], [])
    quoted = "\n".join(line for line in body.splitlines() if not line.startswith("> "))  # the note names the stale
    assert "cu128" in quoted and "cu124" not in quoted and "pytorch-cuda" not in quoted
    assert "corrected" in body.lower() and "pytorch-cuda" not in body


ARGPARSE = "## 问题 6: 命令行参数解析错误\n运行 train.py 时出现 unrecognized arguments：检查参数名称与 --help 的输出。"
DEEPSPEED = "## ZeRO-3 配置\n```yaml\nzero_optimization:\n  stage: 3\n  offload_param: {device: cpu}\n```"
OOM_PARTS = {
    "Guide > 问题：显存溢出 > 原因": "batch 太大。",
    "Guide > 问题：显存溢出 > 解决方案": "```bash\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n```",
}


def test_fixes_come_only_from_the_recognised_problem():
    citations = [_cite(1, "Guide > 问题 6: 命令行参数解析错误", ARGPARSE), _cite(2, "Guide > ZeRO-3 配置", DEEPSPEED)]
    body = compose("train.py: error: unrecognized arguments: --foo", citations, [], False, ["command-line arguments"], [])
    assert "zero_optimization" not in body and "### Fixes" not in body
    assert "[2] ZeRO-3 配置" in body  # still named under See also


def test_parts_of_one_write_up_give_their_fixes_but_a_neighbouring_problem_does_not():
    citations = [_cite(1, "Guide > 问题：显存溢出 > 原因", OOM_PARTS["Guide > 问题：显存溢出 > 原因"]),
                 _cite(2, "Guide > 问题：显存溢出 > 解决方案", OOM_PARTS["Guide > 问题：显存溢出 > 解决方案"]),
                 _cite(3, "Guide > 问题：端口被占用", "```bash\nlsof -i :29500\n```")]
    body = compose("CUDA out of memory", citations, [], False, [], [])
    assert "expandable_segments" in body and "lsof" not in body


@pytest.mark.parametrize(("confidence", "weak"), [(0.55, True), (0.97, False), (None, False)])
def test_a_weak_match_says_so(confidence, weak):
    body = compose("how do I resume", [_cite(1, "Guide > 问题：无法加载检查点", "检查路径。")], [], False, [], [],
                   confidence=confidence)
    assert ("Weak match" in body) is weak
    if weak:
        assert f"{confidence:.2f}" in body


def test_no_match_leads_with_the_evidence_then_nearest_then_what_to_collect():
    finding = FindingView(probe="env_vars", status="problem", code="HF_TOKEN_MISSING", summary="HF_TOKEN is not set",
                          evidence="")
    nearest = [_cite(1, "Guide > 错误2: trust_remote_code警告", "..."), _cite(2, "Guide > 包导入错误", "...")]
    body = compose("GatedRepoError: 401 Client Error", [], [finding], True, ["Hugging Face Hub authentication"],
                   ["GatedRepoError: 401 Client Error"], confidence=0.04, nearest=nearest)
    order = [body.index(marker) for marker in ("HF_TOKEN_MISSING", "GatedRepoError", "No match", "0.04",
                                               "Nearest sections", "trust_remote_code", "What to collect next",
                                               "hf auth whoami", "collect_env")]
    assert order == sorted(order), body
    assert "### Fixes" not in body and "Likely cause" not in body and "[1]" not in body


def test_no_match_in_chinese_without_anything_found_still_says_what_to_collect():
    body = compose("怎么烤面包？面包烤焦了怎么办", [], [], True, [], [])
    assert body.startswith("**没有匹配**：")
    assert "下一步需要收集的信息" in body and "collect_env" in body


def test_what_to_collect_puts_the_recognised_failure_first():
    items = what_to_collect(["Apple MPS"], "en")
    assert "mps" in items[0] and len(items) == len(set(items)) > 2
    assert re.search(r"collect_env", " ".join(what_to_collect([], "en")))
