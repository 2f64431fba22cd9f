"""Markdown -> Slack mrkdwn, checked against Slack's documented formatting rules.

docs.slack.dev/messaging/formatting-message-text: bold is ``*text*`` (one asterisk), ``& < >`` are escaped,
no headings. A delimiter counts only at a word boundary: Slack leaves ``这是*粗体*文字`` literal (the asterisks
touch CJK characters; seratch/ChatGPT-in-Slack#61 and #121 hit the same rule). ``slack_bold_spans`` below
(tests/slack/mrkdwn_rules.py) is that rule, written out, and every bold span the converter makes must satisfy it.
"""

from __future__ import annotations

import re

import pytest
from mrkdwn_rules import slack_bold_spans

from traindoc_slack.mrkdwn import plain_line, to_mrkdwn

INVISIBLE = re.compile("[\u200b\u200c\u200d\u2060\ufeff]")


@pytest.mark.parametrize(("markdown", "expected", "bold"), [
    ("**匹配较弱（置信度 0.60）：**这一节说的是 OOM", "*匹配较弱（置信度 0.60）：* 这一节说的是 OOM", ["匹配较弱（置信度 0.60）："]),
    ("这是**粗体**文字", "这是 *粗体* 文字", ["粗体"]),
    ("- **原因**：显存不足", "• *原因* ：显存不足", ["原因"]),
    ("单卡**OOM**错误", "单卡 *OOM* 错误", ["OOM"]),
    ("### 可能原因：显存溢出", "*可能原因：显存溢出*", ["可能原因：显存溢出"]),
    ("It is **the batch size**.", "It is *the batch size*.", ["the batch size"]),
    ("(**note**) done", "(*note*) done", ["note"]),
    ("用`nvidia-smi`查看", "用 `nvidia-smi` 查看", []),
], ids=["fullwidth-colon-then-cjk", "cjk-both-sides", "bullet", "ascii-inside-cjk", "heading", "english",
        "parenthesis", "code-span-in-cjk"])
def test_emphasis_meets_slacks_word_boundary_rule(markdown: str, expected: str, bold: list[str]) -> None:
    shown = to_mrkdwn(markdown)
    assert shown == expected
    found, literal = slack_bold_spans(shown)
    assert found == bold and literal == []
    assert not INVISIBLE.search(shown), "no invisible character is used to separate a delimiter"


def test_the_rule_checker_itself_rejects_what_slack_leaves_literal() -> None:
    bold, literal = slack_bold_spans("这是*粗体*文字")
    assert bold == [] and len(literal) == 2
    assert slack_bold_spans("这是 *粗体* 文字")[0] == ["粗体"]


def test_lists_and_quotes_become_slacks() -> None:
    shown = to_mrkdwn("1. 第一步\n   - 子项\n* 项目\n- `RuntimeError: x`\n> [1] 本节为 LightRFT 编写")
    assert shown.split("\n") == ["1. 第一步", "   • 子项", "• 项目", "• `RuntimeError: x`", "> [1] 本节为 LightRFT 编写"]


@pytest.mark.parametrize(("markdown", "line"), [
    ("### Likely cause: `CUDA out of memory` (torch.OutOfMemoryError) [1]\n\nmore",
     "Likely cause: CUDA out of memory (torch.OutOfMemoryError)"),
    ("```\nnvidia-smi\n```\n**可能原因**：见 [文档](https://example.org)", "可能原因：见 文档"),
    ("> quoted first\nthen", "quoted first"),
])
def test_plain_line_has_no_markup(markdown: str, line: str) -> None:
    assert plain_line(markdown) == line
