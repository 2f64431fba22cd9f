"""`traindoc web`: a Gradio chat over the same ``ask()``.

The chat streams the answer; each probe or tool call is a collapsible step; citations are a sources
list whose entries expand to the cited section; a panel shows the probe report with a button to run
it again; a log upload works like `ask --log`; thumbs up/down are stored for `traindoc feedback export`.
"""

from __future__ import annotations

import html
import ipaddress
import os
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advice.review import with_notes
from agent.answer import Answer
from agent.core import Question, Troubleshooter
from agent.events import Event, FinalAnswer, Notice, StepFinished, StepStarted, Token
from agent.feedback import FeedbackStore
from common.errors import ConfigError, InputError, TraindocError
from common.secrets import mask
from common.textsafe import escape_markdown, inert_markdown

if TYPE_CHECKING:
    from agent.logs import LogReading

DEFAULT_MAX_UPLOAD_MB = 50
CSS = """
.traindoc-sources details { margin: 4px 0; }
.traindoc-sources pre { white-space: pre-wrap; font-size: 0.85em; }
.traindoc-probes td, .traindoc-probes th { padding: 2px 8px; text-align: left; vertical-align: top; }
"""


@dataclass(frozen=True)
class WebOptions:
    host: str = "127.0.0.1"
    port: int = 7860
    auth: tuple[str, str] | None = None
    max_upload_mb: float = DEFAULT_MAX_UPLOAD_MB
    feedback_db: Path | None = None


def parse_auth(value: str | None) -> tuple[str, str] | None:
    if not value:
        return None
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        raise ConfigError("TRAINDOC_WEB_AUTH must be user:password")
    return user, password


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def shown(markdown: str) -> str:
    """What the chat shows of a text: secrets masked (the page may be shared), and nothing active that a log
    line, a bundle or a model could smuggle in (no link, image or HTML outside code)."""
    return inert_markdown(mask(markdown))


def sources_html(answer: Answer | None) -> str:
    if answer is None or not answer.citations:
        return "<div class='traindoc-sources'><em>No sources for this answer.</em></div>" if answer else ""
    items = []
    for c in answer.citations:
        items.append(
            f"<details><summary>[{c.n}] {html.escape(mask(Path(c.source).name))} › {html.escape(mask(c.cited_as))}</summary>"
            f"<pre>{html.escape(mask(with_notes(c.text, c.notes)))}</pre></details>"
        )
    return "<div class='traindoc-sources'><strong>Sources</strong>" + "".join(items) + "</div>"


def probes_html(results: list[Any]) -> str:
    if not results:
        return "<em>No probe results yet.</em>"
    rows = "".join(
        f"<tr><td>{html.escape(r.probe)}</td><td><strong>{html.escape(str(r.status))}</strong></td>"
        f"<td>{html.escape(mask(r.summary))}</td></tr>"
        for r in results
    )
    return f"<table class='traindoc-probes'><tr><th>probe</th><th>verdict</th><th>summary</th></tr>{rows}</table>"


def uploaded_bundle(path: str | None) -> Path | None:
    """The upload when it is a `traindoc probe --json` bundle (the machine it describes is then diagnosed)."""
    from tools.bundle import looks_like_bundle

    if not path:
        return None
    try:
        with open(path, "rb") as handle:
            return Path(path) if looks_like_bundle(handle.read(4096)) else None
    except OSError:
        return None


def read_upload(path: str | None, max_mb: float, question: str = "") -> tuple[LogReading, tuple[Path, ...]]:
    """The uploaded log, read as a job (triaged)."""
    from agent.logs import LogReading, read_log

    if not path:
        return LogReading("", [], None), ()

    file = Path(path)
    size = file.stat().st_size
    if size > max_mb * 1024 * 1024:
        raise InputError(f"the log is {size / 1e6:.0f} MB; the limit is {max_mb:g} MB", hint="upload the last part of it")
    try:
        reading = read_log(file, question)
    except InputError as exc:  # the user knows the file by its name, not by Gradio's cache path
        raise InputError(exc.message.replace(str(file), f"'{file.name}'"), hint=exc.hint) from exc
    return reading, (file,)


class WebChat:
    """The handlers behind the page; plain methods so gradio_client and tests can call them too."""

    def __init__(self, troubleshooter: Troubleshooter, options: WebOptions) -> None:
        self.troubleshooter = troubleshooter
        self.options = options
        self.feedback = FeedbackStore(options.feedback_db or troubleshooter.settings.data_dir / "feedback.sqlite3")

    def respond(self, message: str, chat: list[dict[str, Any]], log_file: str | None, answers: list[Any]
                ) -> Iterator[tuple[list[dict[str, Any]], str, str, list[Any], str]]:
        chat = list(chat or [])
        answers = list(answers or [])
        text = (message or "").strip()
        if not text and not log_file:
            yield chat, "", "", answers, "Type a question or upload a log."
            return
        history = [{"role": m["role"], "content": content_text(m.get("content"))} for m in chat
                   if m.get("role") in ("user", "assistant") and not (m.get("metadata") or {}).get("title")]
        bundle = uploaded_bundle(log_file)
        try:
            reading, paths = read_upload(None if bundle else log_file, self.options.max_upload_mb, text)
        except TraindocError as exc:
            chat += [{"role": "user", "content": shown(text or "(log)")}, {"role": "assistant", "content": shown(f"⚠️ {exc}")}]
            yield chat, "", "", answers, shown(str(exc))
            return
        head, errors = reading.head, reading.errors
        fallback = "what is wrong with the machine in this bundle?" if bundle else "log"
        question = Question(text=text or (errors[0] if errors else head.splitlines()[0] if head else fallback),
                            log_head=head, log_errors=errors, log_paths=paths, history=history, job=reading.diagnosis,
                            bundle=bundle)
        chat.append({"role": "user", "content": shown(question.text)})
        yield chat, "", "", answers, ""
        events: queue.Queue[Event | BaseException] = queue.Queue()

        def work() -> None:
            try:
                self.troubleshooter.ask(question, on_event=events.put)
            except BaseException as exc:  # shown in the chat, never a server traceback page
                events.put(exc)

        threading.Thread(target=work, daemon=True).start()
        steps: dict[int, int] = {}
        streamed = -1
        tokens = ""
        while True:
            event = events.get()
            if isinstance(event, BaseException):
                message_text = str(event) if isinstance(event, TraindocError) else f"internal error: {type(event).__name__}: {event}"
                chat.append({"role": "assistant", "content": shown(f"⚠️ {message_text}")})
                yield chat, "", "", answers, shown(message_text)
                return
            if isinstance(event, StepStarted):
                steps[event.step] = len(chat)
                args = ", ".join(f"{k}={v!r}" for k, v in event.args.items())
                chat.append({"role": "assistant", "content": "running…",
                             "metadata": {"title": escape_markdown(mask(f"🔧 {event.tool}({args})")), "status": "pending"}})
            elif isinstance(event, StepFinished):
                index = steps.get(event.step)
                if index is not None:
                    chat[index] = {"role": "assistant", "content": shown(event.result or "(no output)"),
                                   "metadata": {"title": chat[index]["metadata"]["title"], "status": "done"}}
            elif isinstance(event, Token):
                if streamed < 0:
                    chat.append({"role": "assistant", "content": ""})
                    streamed = len(chat) - 1
                tokens += event.text
                chat[streamed] = {"role": "assistant", "content": shown(tokens)}
            elif isinstance(event, Notice):
                chat.append({"role": "assistant", "content": shown(f"ℹ️ {event.text}"),
                             "metadata": {"title": "notice", "status": "done"}})
            elif isinstance(event, FinalAnswer):
                answer = event.answer
                text_shown = shown(answer.answer)
                if streamed >= 0:
                    chat[streamed] = {"role": "assistant", "content": text_shown}
                else:
                    chat.append({"role": "assistant", "content": text_shown})
                answers.append({"index": streamed if streamed >= 0 else len(chat) - 1, "answer": answer.to_json(),
                                "shown": text_shown, "texts": {c.chunk_id: c.text for c in answer.citations}})
                yield chat, sources_html(answer), "", answers, ""
                return
            yield chat, "", "", answers, ""

    def rate(self, answers: list[Any], liked: bool, value: Any) -> str:
        """Store a thumbs up/down for the answer the liked message shows (Gradio groups a turn's steps and
        answer into one message, so the answer is found by its text, not by position)."""
        shown = value if isinstance(value, list) else [value]
        texts = {str(v.get("value", v) if isinstance(v, dict) else v) for v in shown}
        for entry in reversed(answers or []):
            if entry.get("shown", entry["answer"]["answer"]) in texts:
                self.feedback.record(_answer_from_json(entry["answer"]), 1 if liked else -1, "web")
                return "Thanks: feedback saved."
        return "That message is not an answer."

    def probe_report(self) -> str:
        from agent.diagnose import ProbeRequest, probe_context
        from tools.registry import run_probes

        context = probe_context(ProbeRequest(text="", timeout_s=self.troubleshooter.settings.probe_timeout_s))
        return probes_html(run_probes(None, context))

    def api_ask(self, question: str) -> dict[str, Any]:
        if not (question or "").strip():
            return {"error": "empty question"}
        from tools.redact import mask_json

        return dict(mask_json(self.troubleshooter.ask(Question(text=question.strip())).to_json()))


def content_text(content: Any) -> str:
    """A chat message's text: Gradio 6 hands the chat back with each content as a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list | tuple):
        return "\n".join(t for t in (content_text(part) for part in content) if t)
    if isinstance(content, dict):
        return content_text(content.get("text", content.get("value")))
    return "" if content is None else str(content)


def _answer_from_json(data: dict[str, Any]) -> Answer:
    from agent.answer import Citation

    return Answer(
        question=data["question"], answer=data["answer"],
        citations=[Citation(c["n"], c["source"], c["section"], c["chunk_id"], c["score"]) for c in data["citations"]],
        findings=[], no_match=data["no_match"], backend=data.get("backend", "offline"),
    )


def build_app(chat: WebChat) -> Any:
    import gradio as gr

    backend = chat.troubleshooter.settings
    backend_name = "offline (no model)" if backend.backend == "offline" else f"{backend.backend}:{backend.llm_model}"
    with gr.Blocks(title="traindoc", analytics_enabled=False) as app:
        gr.Markdown(f"## traindoc — GPU training troubleshooter\nBackend: **{html.escape(backend_name)}**",
                    elem_id="backend")
        answers = gr.State([])
        with gr.Row():
            with gr.Column(scale=3):
                chatbot = gr.Chatbot(label="traindoc", height=520, elem_id="chat")
                with gr.Row():
                    box = gr.Textbox(placeholder="Paste an error or ask: why is NCCL hanging?", show_label=False,
                                     scale=5, elem_id="question")
                    send = gr.Button("Ask", variant="primary", scale=1, elem_id="ask")
                log_file = gr.File(label=f"Training log or probe bundle (max {chat.options.max_upload_mb:g} MB)", type="filepath",
                                   elem_id="log")
                status = gr.Markdown("", elem_id="status")
            with gr.Column(scale=2):
                sources = gr.HTML("", elem_id="sources")
                with gr.Accordion("Probe report (this machine)", open=False):
                    report = gr.HTML("<em>Not run yet.</em>", elem_id="probe-report")
                    rerun = gr.Button("Run the probes again", elem_id="rerun")
        outputs = [chatbot, sources, box, answers, status]
        send.click(chat.respond, [box, chatbot, log_file, answers], outputs, api_visibility="private")
        box.submit(chat.respond, [box, chatbot, log_file, answers], outputs, api_visibility="private")
        rerun.click(chat.probe_report, [], [report], api_name="probes")

        def on_like(state: list[Any], data: gr.LikeData) -> str:
            return chat.rate(state, bool(data.liked), data.value)

        on_like.__annotations__["data"] = gr.LikeData  # postponed annotations: gradio needs the class itself
        chatbot.like(on_like, [answers], [status], api_visibility="private")
        api_question = gr.Textbox(visible=False)
        api_answer = gr.JSON(visible=False)
        api_button = gr.Button(visible=False)
        api_button.click(chat.api_ask, [api_question], [api_answer], api_name="ask")
    return app


def serve(troubleshooter: Troubleshooter, options: WebOptions, *, block: bool = True) -> Any:
    import logging

    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    if not is_loopback(options.host) and options.auth is None:
        logging.getLogger("traindoc").warning(
            "warning: serving on %s without authentication; anyone who can reach it can run probes. "
            "Set TRAINDOC_WEB_AUTH=user:password.", options.host)
    app = build_app(WebChat(troubleshooter, options))
    app.queue(default_concurrency_limit=8)
    app.launch(server_name=options.host, server_port=options.port, auth=options.auth, share=False,
               max_file_size=int(options.max_upload_mb * 2**20), prevent_thread_lock=not block, quiet=True,
               footer_links=[], css=CSS, show_error=False)
    return app
