"""Terminal rendering of an answer with rich: markdown body, then the numbered sources."""

from __future__ import annotations

from rich.console import Console
from rich.markdown import Markdown

from agent.answer import Answer


def print_answer(answer: Answer, console: Console | None = None) -> None:
    console = console or Console()
    console.print(Markdown(answer.answer))
    if answer.citations:
        console.print()
        console.print("[bold]Sources[/bold]")
        for citation in answer.citations:
            console.print(f"  [{citation.n}] {citation.source} › {citation.section}", markup=False, highlight=False)
    if answer.findings:
        console.print()
        console.print("[bold]Probe evidence[/bold]")
        for finding in answer.findings:
            console.print(f"  {finding.probe}: {finding.status}: {finding.summary}", markup=False, highlight=False)
