"""Text from users is inert for where it is shown (common/textsafe.py): properties over arbitrary text, rendered
by a CommonMark renderer, plus the CLI end to end."""

from __future__ import annotations

import subprocess
from pathlib import Path

from clikit import BIN, ROOT
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from agent.compose import compose
from common.textsafe import code_span, escape_mrkdwn, fence, inert_markdown, printable, segments
from ui.slack_blocks import to_mrkdwn

MARKDOWN = MarkdownIt("commonmark")
PIECES = list("`~![]()<>&*_#|\\:/.w @\n-\t") + ["http://a.example/x", "www.a.example", "<img src=x>", "<!channel>", "@here",
                                               "```", "``", "![x](http://a.example/p.png)", "[t](http://a.example)"]
TRICKY = st.lists(st.sampled_from(PIECES), max_size=30).map("".join) | st.text(max_size=80)


@given(text=st.lists(TRICKY, max_size=6).map("".join))
def test_segments_give_the_markdown_back(text: str) -> None:
    assert "".join(piece for _, piece in segments(text)) == text


@given(text=st.lists(TRICKY, max_size=6).map("".join))
def test_nothing_active_survives_outside_code(text: str) -> None:
    html = MARKDOWN.render(inert_markdown(text))
    assert "<a " not in html and "<img" not in html
    assert "<!channel>" not in html and "<script" not in html


@given(line=st.lists(TRICKY, max_size=6).map("".join))
def test_no_backtick_ends_the_code_that_quotes_it(line: str) -> None:
    line = " ".join(line.split()) or "x"
    html = MARKDOWN.render(f"- {code_span(line)}\n")
    assert html.count("<code>") == 1 and "<img" not in html and "<a " not in html
    block = MARKDOWN.render(fence(line.split("\n")) + "\nafter\n")
    assert block.count("<pre>") == 1 and block.rstrip().endswith("<p>after</p>")


@given(text=st.lists(TRICKY, max_size=6).map("".join))
def test_slack_text_carries_no_link_or_mention(text: str) -> None:
    shown = to_mrkdwn(text) + escape_mrkdwn(text)
    assert "<!" not in shown and "<http" not in shown and "<@" not in shown and "<#" not in shown
    assert "@here" not in shown and "@channel" not in shown


def test_the_composer_quotes_a_hostile_error_line_in_code_it_cannot_end() -> None:
    line = "RuntimeError: x ` ![x](http://attacker.example/p.png) [t](http://attacker.example/t) `"
    body = compose("why", [], [], True, [], [line])
    html = MARKDOWN.render(body)
    assert "<img" not in html and "<a " not in html and "attacker.example/p.png" in html


def test_the_terminal_shows_markup_and_escape_sequences_literally(use_shared_index: Path, tmp_path: Path) -> None:
    log = tmp_path / "hostile.log"
    log.write_bytes(b"step 1 loss 2.3\nRuntimeError: [bold]boom[/bold] [link=http://attacker.example]x[/link] "
                    b"\x1b]8;;http://attacker.example\x07click\x1b]8;;\x07 \x1b[2J ![x](http://attacker.example/p.png)\n")
    result = subprocess.run([str(BIN / "ask"), "--no-probes", "--log", str(log), "why did it crash"], capture_output=True,
                            text=True, cwd=ROOT, stdin=subprocess.DEVNULL, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "[bold]boom[/bold]" in result.stdout and "[link=http://attacker.example]" in result.stdout
    assert "\x1b" not in result.stdout
    assert printable("a\x1b[2Jb") == "a\\x1b[2Jb"
