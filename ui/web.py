"""`traindoc web`: a Gradio chat over the same ``ask()``.

The chat streams the answer; each probe or tool call is a collapsible step; an answer's ``[n]`` markers open the
cited section, rendered; the sources panel keeps every answer's sources; a log upload works like `ask --log` and
belongs to the question it came with (and to follow-ups about it: agent/conversation.py decides); conversations
survive a reload (ui/web_history.py), with "New chat"; the probe panel names the server it describes; thumbs
up/down are stored for `traindoc feedback export`. The page's style, script and examples are in ui/web_page.py.
"""

from __future__ import annotations

import html
import ipaddress
import os
import queue
import secrets
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.answer import Answer
from agent.conversation import assistant_turn, user_turn
from agent.core import Question, Troubleshooter
from agent.events import Event, FinalAnswer, Notice, StepFinished, StepStarted, Token
from agent.feedback import FeedbackStore
from common.errors import ConfigError, InputError, TraindocError
from common.secrets import mask
from common.surrogates import escape_surrogates
from common.textsafe import escape_markdown, inert_markdown
from ui.web_history import HistoryStore, owner_of
from ui.web_page import CSS, EXAMPLE_LOG, SCRIPT, SCROLL_TO_ANSWER, citation_items, examples, html_text, server_host
from ui.web_page import sources_html as sources_panel

if TYPE_CHECKING:
    from agent.logs import LogReading

DEFAULT_MAX_UPLOAD_MB = 50
NEW_BROWSER = {"browser": "", "conversation": ""}


@dataclass(frozen=True)
class WebOptions:
    host: str = "127.0.0.1"
    port: int = 7860
    auth: tuple[str, str] | None = None
    max_upload_mb: float = DEFAULT_MAX_UPLOAD_MB
    feedback_db: Path | None = None
    history_db: Path | None = None  # default: web-history.sqlite3 in the data directory
    history_days: float | None = None  # default: TRAINDOC_WEB_HISTORY_DAYS (30); 0 keeps no conversation


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
    """One answer's sources, each expanding to its section rendered (the panel shows every answer's: ui/web_page)."""
    if answer is None:
        return ""
    entry = {**answer.to_json(), "texts": {c.chunk_id: c.text for c in answer.citations}}
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


# Logs read at once from uploads: a hostile upload (a gzip bomb, a 200 MB line) costs its reader, never everyone's.
UPLOAD_READERS = threading.BoundedSemaphore(2)
UPLOAD_WAIT_S = 5.0


@contextmanager
def upload_slot(needed: bool) -> Iterator[None]:
    """A slot among the ``UPLOAD_READERS`` for reading an uploaded log; a question without one never waits. Past
    ``UPLOAD_WAIT_S`` the upload is refused in one line (the server's other users keep their answers)."""
    if not needed:
        yield
        return
    if not UPLOAD_READERS.acquire(timeout=UPLOAD_WAIT_S):
        raise InputError("the server is reading other uploaded logs right now", hint="upload it again in a minute")
    try:
        yield
    finally:
        UPLOAD_READERS.release()


def without_upload_path(message: str, upload: str | None) -> str:
    """``message`` with the server's temporary path of the upload replaced by the file's name."""
    if not upload:
        return message
    name = f"'{Path(upload).name}'"
    for form in sorted({upload, str(Path(upload).resolve()), str(Path(upload).parent)}, key=len, reverse=True):
        message = message.replace(form, name)
    return message


Outputs = tuple[list[dict[str, Any]], str, str, list[Any], str, list[Any], Any, dict[str, str]]


class WebChat:
    """The handlers behind the page; plain methods so gradio_client and tests can call them too.

    A turn's state: ``chat`` (the messages shown), ``answers`` (each answer's JSON, the text shown, its sections'
    texts and its turn number), ``turns`` (the conversation as ``ask()`` reads it: agent.conversation's user and
    assistant turns) and ``browser`` (the page's own id and its conversation's, kept in the browser)."""

    def __init__(self, troubleshooter: Troubleshooter, options: WebOptions) -> None:
        self.troubleshooter = troubleshooter
        self.options = options
        self.feedback = FeedbackStore(options.feedback_db or troubleshooter.settings.data_dir / "feedback.sqlite3")
        settings = getattr(troubleshooter, "settings", None)
        days = options.history_days if options.history_days is not None else (settings.web_history_days if settings else 0)
        path = options.history_db or (settings.data_dir / "web-history.sqlite3" if settings else Path("web-history.sqlite3"))
        self.history = HistoryStore(path, days)

    # -- a turn ------------------------------------------------------------------------------------------------
    def respond(self, message: str, chat: list[dict[str, Any]], log_file: str | None, answers: list[Any],
                turns: list[Any] | None = None, browser: dict[str, str] | None = None, username: str | None = None
                ) -> Iterator[Outputs]:
        chat = list(chat or [])
        answers = list(answers or [])
        turns = list(turns or [])
        browser = self._browser(browser)
        text = escape_surrogates((message or "").strip())[0]  # a lone surrogate would break the stream and the stores
        if not text and not log_file:
            yield chat, sources_panel(answers), "", answers, "Type a question or upload a log.", turns, log_file, browser
            return
        bundle = uploaded_bundle(log_file)
        try:
            with upload_slot(bool(log_file) and not bundle):
                reading, paths = read_upload(None if bundle else log_file, self.options.max_upload_mb, text)
        except TraindocError as exc:
            said = without_upload_path(str(exc), log_file)
            chat += [{"role": "user", "content": shown(text or "(log)")}, {"role": "assistant", "content": shown(f"⚠️ {said}")}]
            turns.append(user_turn(text or "(log)"))
            self._save(username, browser, chat, answers, turns)
            yield chat, sources_panel(answers), "", answers, shown(said), turns, None, browser
            return
        head, errors = reading.head, reading.errors
        fallback = "what is wrong with the machine in this bundle?" if bundle else "log"
        question = Question(text=text or (errors[0] if errors else head.splitlines()[0] if head else fallback),
                            log_head=head, log_errors=errors, log_paths=paths, history=list(turns), job=reading.diagnosis,
                            bundle=bundle)
        upload_name = Path(log_file).name if log_file else ""
        chat.append({"role": "user", "content": shown(question.text + (f"\n\n📎 {upload_name}" if upload_name else ""))})
        turn_number = sum(1 for m in chat if m.get("role") == "user")
        turn_start = len(chat)  # where this turn's answer goes
        yield chat, sources_panel(answers), "", answers, "", turns, None, browser
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
        asked = user_turn(question.text, log_head=head, log_errors=errors, log_name=upload_name if paths else "",
                          log_paths=[str(p) for p in paths])
        while True:
            event = events.get()
            if isinstance(event, BaseException):
                message_text = str(event) if isinstance(event, TraindocError) else f"internal error: {type(event).__name__}"
                message_text = without_upload_path(message_text, log_file)  # the user knows the file by its name
                chat.append({"role": "assistant", "content": shown(f"⚠️ {message_text}")})
                turns.append(asked)
                self._save(username, browser, chat, answers, turns)
                yield chat, sources_panel(answers), "", answers, shown(message_text), turns, None, browser
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
                # The answer right under the question, its verdict in view; the probes and notices that made it
                # follow it, folded (they used to push the cause and the first fix below the chat's fold).
                made_it = [m for i, m in enumerate(chat[turn_start:], turn_start) if i != streamed]
                chat = [*chat[:turn_start], {"role": "assistant", "content": text_shown}, *made_it]
                answers.append({"index": turn_start, "answer": answer.to_json(),
                                "shown": text_shown, "texts": {c.chunk_id: c.text for c in answer.citations},
                                "turn": turn_number})
                turns += [asked, assistant_turn(answer, text_shown)]
                self._save(username, browser, chat, answers, turns)
                yield chat, sources_panel(answers), "", answers, "", turns, None, browser
                return
            yield chat, sources_panel(answers), "", answers, "", turns, None, browser

    # -- conversations -----------------------------------------------------------------------------------------
    @staticmethod
    def _browser(browser: dict[str, str] | None) -> dict[str, str]:
        """The page's ids: a browser seen for the first time gets its own, and every page a conversation id."""
        browser = {**NEW_BROWSER, **(browser or {})}
        if not browser["browser"]:
            browser["browser"] = secrets.token_hex(16)
        if not browser["conversation"]:
            browser["conversation"] = uuid.uuid4().hex
        return browser

    def _save(self, username: str | None, browser: dict[str, str], chat: list[Any], answers: list[Any],
              turns: list[Any]) -> None:
        first = next((t["content"] for t in turns if t.get("role") == "user"), "")
        self.history.save(owner_of(username, browser["browser"]), browser["conversation"], first,
                          {"chat": chat, "answers": answers, "turns": turns})

    def restore(self, browser: dict[str, str] | None, username: str | None = None
                ) -> tuple[list[Any], str, list[Any], list[Any], dict[str, str], list[tuple[str, str]]]:
        """The page as it was: the browser's (or the signed-in user's) current conversation, and the earlier ones."""
        browser = self._browser(browser)
        owner = owner_of(username, browser["browser"])
        saved = self.history.load(owner, browser["conversation"])
        state = saved.state if saved else {}
        answers = list(state.get("answers", []))
        return (list(state.get("chat", [])), sources_panel(answers), answers, list(state.get("turns", [])), browser,
                self.earlier(owner))

    def earlier(self, owner: str) -> list[tuple[str, str]]:
        return [(saved.title, saved.id) for saved in self.history.recent(owner)]

    def open_conversation(self, conversation: str | None, browser: dict[str, str] | None, username: str | None = None
                          ) -> tuple[list[Any], str, list[Any], list[Any], dict[str, str], list[tuple[str, str]]]:
        browser = self._browser(browser)
        if conversation:
            browser["conversation"] = conversation
        return self.restore(browser, username)

    def new_chat(self, browser: dict[str, str] | None, username: str | None = None
                 ) -> tuple[list[Any], str, list[Any], list[Any], dict[str, str], list[tuple[str, str]]]:
        """An empty chat; the one before stays among the earlier chats."""
        browser = {**self._browser(browser), "conversation": uuid.uuid4().hex}
        return [], "", [], [], browser, self.earlier(owner_of(username, browser["browser"]))

    # -- the side panels ---------------------------------------------------------------------------------------
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
        text = escape_surrogates((question or "").strip())[0]
        if not text:
            return {"error": "empty question"}
        from tools.redact import mask_json

        return dict(mask_json(self.troubleshooter.ask(Question(text=text)).to_json()))


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


def _username(request: Any) -> str | None:
    """The signed-in user (TRAINDOC_WEB_AUTH), whose conversations follow them from browser to browser."""
    return getattr(request, "username", None) or None


def browser_secret(path: Path) -> str:
    """The key the page's local storage is sealed with: made once, kept beside the history."""
    try:
        return path.read_text(encoding="utf-8").strip() or _new_secret(path)
    except OSError:
        return _new_secret(path)


def _new_secret(path: Path) -> str:
    value = secrets.token_hex(32)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value, encoding="utf-8")
        path.chmod(0o600)
    except OSError:  # a read-only data folder: the ids last until the server restarts
        pass
    return value


def build_app(chat: WebChat) -> Any:
    import gradio as gr

    backend = chat.troubleshooter.settings
    backend_name = "offline (no model)" if backend.backend == "offline" else f"{backend.backend}:{backend.llm_model}"
    host = server_host()
    with gr.Blocks(title="traindoc", analytics_enabled=False) as app:
        with gr.Row(equal_height=True):
            gr.Markdown(f"## traindoc — GPU training troubleshooter\nBackend: **{html.escape(backend_name)}**",
                        elem_id="backend")
            new = gr.Button("＋ New chat", elem_id="new-chat", scale=0, min_width=150, size="sm")
        answers = gr.State([])
        turns = gr.State([])
        browser = gr.BrowserState(dict(NEW_BROWSER), storage_key="traindoc-chat",
                                  secret=browser_secret(chat.history.path.with_suffix(".key")))
        with gr.Row():
            with gr.Column(scale=3, min_width=320):
                chatbot = gr.Chatbot(label="traindoc", height="min(560px, 62vh)", elem_id="chat", autoscroll=False,
                                     buttons=["copy", "copy_all"], examples=examples(),  # type: ignore[arg-type]
                                     placeholder="Paste an error, upload a training log, or describe a hang.")
                with gr.Row(elem_id="question-row"):
                    # usable once the page's conversation is restored, so that a restore never replaces a new turn
                    box = gr.Textbox(placeholder="Paste an error or ask: why is NCCL hanging?", show_label=False,
                                     scale=5, elem_id="question", lines=1, max_lines=12, interactive=False)
                    send = gr.Button("Ask", variant="primary", scale=1, elem_id="ask", min_width=80, interactive=False)
                log_file = gr.File(label=f"Training log or probe bundle for this question (max {chat.options.max_upload_mb:g} MB)",
                                   type="filepath", elem_id="log", height=110)
                status = gr.Markdown("", elem_id="status")
            with gr.Column(scale=2, min_width=320):
                sources = gr.HTML("", elem_id="sources")
                earlier = gr.Dropdown(choices=[], label="Earlier chats", elem_id="earlier", value=None,
                                      visible=chat.history.enabled)
                with gr.Accordion(f"Probe report: {host} (the server)", open=False, elem_id="probe-panel"):
                    gr.Markdown(f"What traindoc's probes see on **{html.escape(host)}**, the machine serving this page; "
                                "not the machine your browser runs on.", elem_id="probe-host")
                    report = gr.HTML("<em>Not run yet.</em>", elem_id="probe-report")
                    rerun = gr.Button(f"Run the probes on {host}", elem_id="rerun")

        def respond(message: str, messages: list[Any], upload: str | None, state: list[Any], history: list[Any],
                    ids: dict[str, str], request: gr.Request) -> Iterator[Any]:
            yield from chat.respond(message, messages, upload, state, history, ids, _username(request))

        def restore(ids: dict[str, str], request: gr.Request) -> tuple[Any, ...]:
            *shown_state, choices = chat.restore(ids, _username(request))
            return (*shown_state, gr.update(choices=choices, value=None), gr.update(interactive=True),
                    gr.update(interactive=True))

        def reopen(conversation: str | None, ids: dict[str, str], request: gr.Request) -> tuple[Any, ...]:
            *shown_state, choices = chat.open_conversation(conversation, ids, _username(request))
            return (*shown_state, gr.update(choices=choices))

        def start_over(ids: dict[str, str], request: gr.Request) -> tuple[Any, ...]:
            *shown_state, choices = chat.new_chat(ids, _username(request))
            return (*shown_state, gr.update(choices=choices, value=None), None, "", "")

        def pick_example(data: gr.SelectData) -> tuple[str, str | None]:
            value = data.value if isinstance(data.value, dict) else {"text": str(data.value)}
            files = value.get("files") or []
            return str(value.get("text") or ""), (str(EXAMPLE_LOG) if files else None)

        def refresh_earlier(ids: dict[str, str], request: gr.Request) -> Any:
            return gr.update(choices=chat.earlier(owner_of(_username(request), (ids or {}).get("browser"))))

        for fn in (respond, restore, reopen, start_over, refresh_earlier):  # postponed annotations: gradio needs the class
            fn.__annotations__["request"] = gr.Request
        pick_example.__annotations__["data"] = gr.SelectData
        inputs = [box, chatbot, log_file, answers, turns, browser]
        outputs = [chatbot, sources, box, answers, status, turns, log_file, browser]
        conversation = [chatbot, sources, answers, turns, browser, earlier]
        for trigger in (send.click, box.submit):
            trigger(respond, inputs, outputs, api_visibility="private").then(
                None, None, None, js=SCROLL_TO_ANSWER, api_visibility="private").then(
                refresh_earlier, [browser], [earlier], api_visibility="private")
        chatbot.example_select(pick_example, None, [box, log_file], api_visibility="private").then(
            respond, inputs, outputs, api_visibility="private").then(
            None, None, None, js=SCROLL_TO_ANSWER, api_visibility="private").then(
            refresh_earlier, [browser], [earlier], api_visibility="private")
        for trigger in (new.click, chatbot.clear):  # the chat's own 🗑 starts a new chat too (never half-cleared)
            trigger(start_over, [browser], [*conversation, log_file, box, status], api_visibility="private")
        earlier.input(reopen, [earlier, browser], conversation, api_visibility="private")
        app.load(restore, [browser], [*conversation, box, send], api_visibility="private")
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
    app.queue(default_concurrency_limit=16)  # uploads read at most UPLOAD_READERS at once: the rest stay free
    app.launch(server_name=options.host, server_port=options.port, auth=options.auth, share=False,
               max_file_size=int(options.max_upload_mb * 2**20), prevent_thread_lock=not block, quiet=True,
               footer_links=[], css=CSS, head=SCRIPT, show_error=False, allowed_paths=[str(EXAMPLE_LOG)])
    return app
