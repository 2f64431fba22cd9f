"""Terminal rendering with rich: the streamed answer (tokens and tool calls as they happen), then the
final answer: its verdict first, the detail, the sources by title, and last a one-line summary (cause and first
fix), so what stays on an 80x24 screen is the answer.

Code is printed as it is, never wrapped or cut: a long command runs past the edge (the terminal soft-wraps it)
rather than breaking into two commands. Colour follows rich (off with ``NO_COLOR``); on anything that is not a
terminal, and with ``--format text|markdown``, the answer is printed as text to paste (traindoc_cli.screen).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rich.console import Console
from rich.markdown import Markdown
from rich.markup import escape
from rich.text import Text

from agent.answer import Answer
from agent.events import Event, FinalAnswer, Notice, StepFinished, StepStarted, Token
from common.language import language_of, say
from common.textsafe import inert_markdown, printable, segments
from traindoc_cli.screen import closing_line, document, probes_line


def _markdown(text: str) -> Markdown:
    """Markdown that only traindoc formats: a link, image or escape sequence in quoted text stays text."""
    return Markdown(inert_markdown(printable(text)))


def _plain(text: str) -> str:
    """Text inside rich markup: its own [brackets] and control characters shown, not obeyed."""
    return escape(printable(text))


def print_answer(answer: Answer, console: Console | None = None, fmt: str | None = None, *, full: bool = False) -> None:
    """``fmt``: "text" or "markdown" (text to paste), "terminal" (rich); None: terminal only on a terminal.
    ``full``: the whole answer, not the brief one (agent.brief)."""
    console = console or Console()
    if fmt is None:
        fmt = "terminal" if console.is_terminal else "text"
    if fmt != "terminal":
        if fmt == "markdown":  # text to paste into an issue: masked, as everything that leaves the machine
            from tools.redact import mask_answer

            answer = mask_answer(answer)
        console.file.write(document(answer, fmt, console.width, full=full))
        console.file.flush()
        return
    if answer.notice:
        console.print(f"[yellow]{say('note', answer.lang)}:[/yellow] {_plain(answer.notice)}", highlight=False)
    _print_body(answer.answer if full else answer.shown, console)
    _print_sources(answer, console, full or not answer.brief)


def _print_body(text: str, console: Console) -> None:
    """The markdown through rich, its code blocks printed raw (unwrapped) between the prose around them."""
    pending: list[str] = []

    def flush() -> None:
        prose = "".join(pending).strip("\n")
        pending.clear()
        if prose.strip():
            console.print(Markdown(prose))

    for kind, piece in segments(inert_markdown(printable(text))):
        if kind != "fence":
            pending.append(piece)
            continue
        flush()
        lines = piece.rstrip("\n").split("\n")
        indent = len(lines[0]) - len(lines[0].lstrip())
        console.print()
        for line in lines[1:-1]:
            console.print(Text("  " + " " * indent + line[indent:], style="cyan"), soft_wrap=True, highlight=False)
        console.print()
    flush()


def _print_sources(answer: Answer, console: Console, full: bool) -> None:
    lang = answer.lang
    if answer.citations:
        console.print()
        console.print(f"[bold]{say('sources', lang)}[/bold]")
        shown = answer.sources(full)
        for citation in shown:
            console.print(Text(printable(f"  [{citation.n}] {citation.named}")), highlight=False)
        if len(answer.citations) > len(shown):
            console.print(Text(say("more_sources", lang, count=len(answer.citations) - len(shown))), highlight=False)
    if line := probes_line(answer, lang):
        console.print(Text(printable(line.replace("`", ""))), highlight=False)
    if answer.grounded is False:
        console.print(f"[bold yellow]{say('warning', lang)}:[/bold yellow] {say('unverified', lang)}")
    if last := closing_line(answer, console.width):
        console.print()
        console.print(Text(printable(last), style="bold"), soft_wrap=True, highlight=False)


def output_console(fmt: str | None) -> tuple[Console, str]:
    """The console `ask` prints to, and the format: rich on a terminal (or where rich is told to act as one:
    FORCE_COLOR, TTY_COMPATIBLE), text elsewhere, or what was asked."""
    console = Console()
    return console, fmt or ("terminal" if console.is_terminal else "text")


class StreamPrinter:
    """An event sink for a model-backed answer: shows each tool call and the tokens live."""

    def __init__(self, console: Console | None = None, fmt: str | None = None) -> None:
        self.console = console or Console()
        self.fmt = fmt
        self._live: Any = None
        self._text = ""
        self._noticed: set[str] = set()

    def _ensure_live(self) -> Any:
        if self._live is None:
            from rich.live import Live

            self._live = Live(Markdown(""), console=self.console, refresh_per_second=8, transient=True)
            self._live.start()
        return self._live

    def __call__(self, event: Event) -> None:
        if isinstance(event, StepStarted):
            args = ", ".join(f"{k}={v!r}" for k, v in event.args.items())
            self.console.print(f"[dim]→ {_plain(f'{event.tool}({args})')}[/dim]", highlight=False)
        elif isinstance(event, StepFinished):
            first = event.result.splitlines()[0] if event.result else ""
            self.console.print(f"[dim]  ✓ {_plain(f'{event.tool}: {first[:100]}')}{' (cached)' if event.cached else ''}[/dim]",
                               markup=True, highlight=False)
        elif isinstance(event, Token):
            self._text += event.text
            self._ensure_live().update(_markdown(self._text))
        elif isinstance(event, Notice):
            if self._live is not None:  # what streamed so far is superseded (a fallback or explain mode follows)
                self._live.stop()
                self._live = None
            self._text = ""
            self.console.print(f"[yellow]{say('note', language_of(event.text))}:[/yellow] {_plain(event.text)}", highlight=False)
            self._noticed.add(event.text)
        elif isinstance(event, FinalAnswer):
            if self._live is not None:
                self._live.stop()
                self._live = None
            answer = event.answer
            if answer.notice and answer.notice in self._noticed:  # said once, as it happened
                answer = replace(answer, notice=None)
            print_answer(answer, self.console, self.fmt)
