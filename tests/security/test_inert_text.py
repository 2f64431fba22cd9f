"""Text from users is inert for where it is shown (common/textsafe.py): properties over arbitrary text, rendered
by a CommonMark renderer, plus the CLI end to end (terminal, text, JSON)."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

from clikit import BIN, ROOT
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from rich.console import Console

from agent.answer import Answer
from agent.compose import compose
from common.textsafe import code_span, escape_markdown, escape_mrkdwn, fence, inert_markdown, printable, segments
from traindoc_cli.render import print_answer
from traindoc_cli.screen import document
from traindoc_slack.blocks import to_mrkdwn

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


# -- invisible characters: bidi controls and zero-width characters ---------------------------------------------

BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff\u180e"
EMOJI = ["👩\u200d💻", "🏳\ufe0f\u200d🌈", "❤\ufe0f\u200d🔥", "👨\U0001f3fd\u200d🔧", "👍🏽", "✔\ufe0f"]
SPOOF = "invoice_\u202egpj.exe"  # reads "invoice_exe.jpg"
# each invisible character after a letter: a joiner is never drawn between two emoji, where it is one of them
INVISIBLE_TEXT = st.lists(st.sampled_from([*(f"a{c}" for c in BIDI + ZERO_WIDTH), *EMOJI, " ", "`", "<", "\n", "@", "x.y",
                                           "\x1b"]), max_size=40).map("".join)


def hidden(text: str) -> set[str]:
    """The invisible characters ``text`` still carries raw, a joiner inside an emoji sequence apart."""
    for sequence in EMOJI:
        text = text.replace(sequence, "")
    return {char for char in text if char in BIDI + ZERO_WIDTH}


def test_bidi_and_zero_width_characters_are_shown_and_emoji_kept() -> None:
    for char in BIDI + ZERO_WIDTH:
        assert printable(f"a{char}b") == f"a<U+{ord(char):04X}>b"
    assert printable(SPOOF) == "invoice_<U+202E>gpj.exe"
    for sequence in EMOJI:
        assert printable(sequence) == sequence
        assert escape_markdown(sequence) == sequence and inert_markdown(sequence) == sequence
        assert escape_mrkdwn(sequence) == sequence
    assert printable("a\u200db 👩\u200d x \u200d💻") == "a<U+200D>b 👩<U+200D> x <U+200D>💻"  # a joiner outside an emoji


@given(text=INVISIBLE_TEXT)
def test_no_surface_carries_an_invisible_character(text: str) -> None:
    for shown in (printable(text), escape_markdown(text), inert_markdown(text), escape_mrkdwn(text), to_mrkdwn(text)):
        assert not hidden(shown), (text, shown)
    assert printable(printable(text)) == printable(text)


def test_inside_code_too() -> None:
    assert inert_markdown(f"see `{SPOOF}` and\n```\n{SPOOF}\n```\n").count("<U+202E>") == 2
    assert "\u202e" not in to_mrkdwn(f"see `{SPOOF}` and\n```\n{SPOOF}\n```\n")


def test_no_link_of_any_kind_from_text_in_markdown() -> None:
    text = ("mail ops@attacker.example or a.b+c@attacker.example, see http://attacker.example/x, www.attacker.example, "
            "<http://attacker.example/a>, <ops@attacker.example>, [d](http://attacker.example/d), mailto:ops@attacker.example")
    html = MARKDOWN.render(inert_markdown(text))
    assert "<a " not in html and "ops@attacker.example" in html and "http://attacker.example/x" in html
    assert "\\@" not in html  # the escape is Markdown's own: the reader sees "@"


def _answer(body: str, question: str = "why did it crash") -> Answer:
    return Answer(question=question, answer=body, citations=[], findings=[], no_match=False, error_lines=[body])


def test_every_cli_format_shows_the_override(tmp_path: Path) -> None:
    body = f"The job failed reading `{SPOOF}`: {SPOOF} 👩\u200d💻 🏳\ufe0f\u200d🌈"
    for fmt in ("text", "markdown"):
        shown = document(_answer(body), fmt)
        assert not hidden(shown) and "<U+202E>" in shown and "👩\u200d💻" in shown and "🏳\ufe0f\u200d🌈" in shown, fmt
    terminal = io.StringIO()
    print_answer(_answer(body), Console(file=terminal, force_terminal=True, width=100), "terminal")
    assert not hidden(terminal.getvalue()) and "<U+202E>" in terminal.getvalue() and "👩\u200d💻" in terminal.getvalue()
    data = json.dumps(_answer(body, f"why {SPOOF}").to_json(), ensure_ascii=False)
    assert not hidden(data) and "<U+202E>" in json.loads(data)["answer"] and "👩\u200d💻" in data


def test_the_cli_shows_an_override_from_a_log_in_text_and_json(use_shared_index: Path, tmp_path: Path) -> None:
    log = tmp_path / "spoof.log"
    log.write_text(f"step 1 loss 2.3\nRuntimeError: CUDA error: out of memory while loading {SPOOF} "
                   "ops\u200b@example.com 👩\u200d💻\n", encoding="utf-8")
    for args in ([], ["--json"]):
        result = subprocess.run([str(BIN / "ask"), "--no-probes", *args, "--log", str(log), f"why {SPOOF} crashed"],
                                capture_output=True, text=True, encoding="utf-8", cwd=ROOT, stdin=subprocess.DEVNULL,
                                timeout=120, check=False)
        assert result.returncode == 0, result.stderr
        assert not hidden(result.stdout), args
        assert "<U+202E>" in result.stdout and "<U+200B>" in result.stdout and "👩\u200d💻" in result.stdout, args
        if args:
            data = json.loads(result.stdout)
            assert "<U+202E>" in data["answer"] and "<U+202E>" in json.dumps(data["diagnosis"], ensure_ascii=False)
