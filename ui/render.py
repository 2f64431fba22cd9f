"""Terminal rendering with rich: the streamed answer (tokens and tool calls as they happen), then the
final markdown answer and its numbered sources."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markdown import Markdown
from rich.markup import escape

from agent.answer import Answer
from agent.events import Event, FinalAnswer, Notice, StepFinished, StepStarted, Token
from common.language import language_of, say
from common.textsafe import inert_markdown, printable


def _markdown(text: str) -> Markdown:
    """Markdown that only traindoc formats: a link, image or escape sequence in quoted text stays text."""
    return Markdown(inert_markdown(printable(text)))


def _plain(text: str) -> str:
    """Text inside rich markup: its own [brackets] and control characters shown, not obeyed."""
    return escape(printable(text))


def print_answer(answer: Answer, console: Console | None = None) -> None:
    console = console or Console()
    if answer.notice:
        console.print(f"[yellow]{say('note', language_of(answer.question))}:[/yellow] {_plain(answer.notice)}", highlight=False)
    console.print(_markdown(answer.answer))
    _print_sources(answer, console)


def _print_sources(answer: Answer, console: Console) -> None:
    lang = language_of(answer.question)
    if answer.citations:
        console.print()
        console.print(f"[bold]{say('sources', lang)}[/bold]")
        for citation in answer.citations:
            console.print(printable(f"  [{citation.n}] {citation.source} › {citation.cited_as}"), markup=False, highlight=False)
    if answer.findings:
        console.print()
        console.print(f"[bold]{say('probe_evidence', lang)}[/bold]")
        for finding in answer.findings:
            refs = "".join(f"[{n}]" for n in finding.related)
            console.print(printable(f"  {finding.probe}: {finding.status}: {finding.code}: {finding.summary} {refs}".rstrip()),
                          markup=False, highlight=False)
    if answer.grounded is False:
        console.print(f"[bold yellow]{say('warning', lang)}:[/bold yellow] {say('unverified', lang)}")


class StreamPrinter:
    """An event sink for a model-backed answer: shows each tool call and the tokens live."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console()
        self._live: Any = None
        self._text = ""

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
        elif isinstance(event, FinalAnswer):
            if self._live is not None:
                self._live.stop()
                self._live = None
            self.console.print(_markdown(event.answer.answer))
            _print_sources(event.answer, self.console)
