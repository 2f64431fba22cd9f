"""`traindoc web`'s Gradio app: the page, its components wired to ``WebChat``'s handlers (traindoc_web/chat.py) with its style,
script and examples from traindoc_web/page.py, and the server that serves it."""

from __future__ import annotations

import html
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent.core import Troubleshooter
from common.memory import fixed_mmap_threshold, limit_malloc_arenas
from common.private import exit_handlers_on_sigterm, private_file
from traindoc_web.chat import WebChat, WebOptions, is_loopback
from traindoc_web.held import guard_uploads
from traindoc_web.history import owner_of
from traindoc_web.page import CSS, EXAMPLE_LOG, NEW_BROWSER, SCRIPT, SCROLL_TO_ANSWER, examples, server_host


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
        private_file(path).write_text(value, encoding="utf-8")  # 0600 from its creation: never readable by others
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
                with gr.Row(visible=False, elem_id="fixed-row") as fixed_row:  # shown after a 👍 kept an incident
                    fixed_note = gr.Textbox(placeholder="What did you change? e.g. drained gpu-17, set NCCL_SOCKET_IFNAME",
                                            show_label=False, scale=5, elem_id="fixed-note", lines=1, max_lines=4)
                    save_note = gr.Button("Save note", scale=1, elem_id="save-note", min_width=80)
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

        incident = gr.State("")  # the incident the last 👍 kept, for its note

        def on_like(state: list[Any], data: gr.LikeData) -> tuple[Any, ...]:
            said, kept = chat.rate_and_remember(state, bool(data.liked), data.value)
            return said, kept, gr.update(visible=bool(kept)), ""

        def on_note(kept: str, note: str) -> tuple[Any, ...]:
            said = chat.save_note(kept, note)
            saved = said.startswith("Thanks")
            return said, gr.update(visible=not saved), "" if saved else gr.update()

        on_like.__annotations__["data"] = gr.LikeData  # postponed annotations: gradio needs the class itself
        chatbot.like(on_like, [answers], [status, incident, fixed_row, fixed_note], api_visibility="private")
        for trigger in (save_note.click, fixed_note.submit):
            trigger(on_note, [incident, fixed_note], [status, fixed_row, fixed_note], api_visibility="private")
        api_question = gr.Textbox(visible=False)
        api_answer = gr.JSON(visible=False)
        api_button = gr.Button(visible=False)
        api_button.click(chat.api_ask, [api_question], [api_answer], api_name="ask")
    return app


def serve(troubleshooter: Troubleshooter, options: WebOptions, *, block: bool = True) -> Any:
    import logging

    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    limit_malloc_arenas(2)  # every request runs on a thread: glibc's arena per thread would keep each one's peak
    fixed_mmap_threshold()  # a refused 5 MB paste's request body goes back to the system once it is freed
    if not is_loopback(options.host) and options.auth is None:
        logging.getLogger("traindoc").warning(
            "warning: serving on %s without authentication; anyone who can reach it can run probes. "
            "Set TRAINDOC_WEB_AUTH=user:password.", options.host)
    app = build_app(WebChat(troubleshooter, options))
    app.queue(default_concurrency_limit=16)  # uploads read at most UPLOAD_READERS at once: the rest stay free
    guard_uploads()  # a full disk: an upload is held in memory, or refused in one line (HTTP 507), never a 500
    app.launch(server_name=options.host, server_port=options.port, auth=options.auth, share=False,
               max_file_size=int(options.max_upload_mb * 2**20), prevent_thread_lock=True, quiet=True,
               footer_links=[], css=CSS, head=SCRIPT, show_error=False, allowed_paths=[str(EXAMPLE_LOG)])
    exit_handlers_on_sigterm()  # the private folders a read-only data folder made go with the server
    if block:
        app.block_thread()
    return app

