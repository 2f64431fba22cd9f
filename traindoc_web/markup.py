"""What the web chat shows of an answer, a probe run or a message: Markdown with secrets masked and nothing active,
one answer's sources, the probe table, and a chat message's text as Gradio hands it back."""

from __future__ import annotations

import base64
import html
from typing import Any

from agent.answer import Answer
from common.language import say
from common.secrets import mask
from common.textsafe import escape_markdown, inert_markdown
from traindoc_web.page import citation_items, html_text


def shown(markdown: str) -> str:
    """What the chat shows of a text: secrets masked (the page may be shared), and nothing active that a log
    line, a bundle or a model could smuggle in (no link, image or HTML outside code)."""
    return inert_markdown(mask(markdown))


def timeline_markdown(answer: Answer) -> str:
    """The job's timeline picture (jobs.picture) below an answer that triaged a job's logs, as an image of our own
    SVG: shown by the browser as an image (no script in it runs, nothing it names is fetched), its log text already
    masked and escaped where it was drawn; "" for any other answer."""
    from jobs.picture import svg_of

    svg = svg_of(answer.diagnosis, answer.lang)
    if svg is None:
        return ""
    encoded = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return f"\n\n![{escape_markdown(say('picture.legend.timeline', answer.lang))}](data:image/svg+xml;base64,{encoded})"


def shared_json(answer: Answer) -> dict[str, Any]:
    """``answer.to_json()`` as the web shows and serves it: sources named as others may read them
    (corpus.manifest.shared_source), not by the server's paths."""
    from corpus.manifest import shared_source

    data = answer.to_json()
    data["citations"] = [{**c, "source": shared_source(str(c.get("source", "")))} for c in data["citations"]]
    return data


def sources_html(answer: Answer | None) -> str:
    """One answer's sources, each expanding to its section rendered (the panel shows every answer's: traindoc_web/page)."""
    if answer is None:
        return ""
    entry = {**shared_json(answer), "texts": {c.chunk_id: c.text for c in answer.citations}}
    return "<div class='traindoc-sources'><strong>Sources</strong>" + citation_items(entry) + "</div>"


def probes_html(results: list[Any]) -> str:
    if not results:
        return "<em>No probe results yet.</em>"
    rows = "".join(
        f"<tr><td>{html.escape(r.probe)}</td><td><strong>{html.escape(str(r.status))}</strong></td>"
        f"<td>{html_text(r.summary)}</td></tr>"
        for r in results
    )
    return f"<table class='traindoc-probes'><tr><th>probe</th><th>verdict</th><th>summary</th></tr>{rows}</table>"



def content_text(content: Any) -> str:
    """A chat message's text: Gradio 6 hands the chat back with each content as a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list | tuple):
        return "\n".join(t for t in (content_text(part) for part in content) if t)
    if isinstance(content, dict):
        return content_text(content.get("text", content.get("value")))
    return "" if content is None else str(content)

