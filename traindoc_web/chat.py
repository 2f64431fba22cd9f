"""`traindoc web`: a Gradio chat over the same ``ask()``.

The chat streams the answer; each probe or tool call is a collapsible step; an answer's ``[n]`` markers open the
cited section, rendered; the sources panel keeps every answer's sources; a log upload works like `ask --log` and
belongs to the question it came with (and to follow-ups about it: agent/conversation.py decides); conversations
survive a reload (traindoc_web/history.py), with "New chat"; the probe panel names the server it describes; thumbs
up/down are stored for `traindoc feedback export`. This module holds the handlers behind the page; the page and
the server are built by traindoc_web/app.py (its style, script and examples are in traindoc_web/page.py), an upload is read
by traindoc_web/upload.py, and what the chat shows of a text is made safe by traindoc_web/markup.py.
"""

from __future__ import annotations

import html
import ipaddress
import logging
import queue
import secrets
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.answer import Answer
from agent.conversation import assistant_turn, user_turn
from agent.core import Troubleshooter
from agent.events import FinalAnswer, Notice, StepFinished, StepStarted, Token
from agent.feedback import FeedbackStore
from agent.intake import NoContent, Received, intake
from common.errors import ConfigError, TraindocError
from common.language import Lang, language_of, say
from common.memory import return_freed_memory
from common.secrets import mask
from common.surrogates import escape_surrogates
from common.textsafe import escape_markdown
from incidents.record import record_fixed
from incidents.store import IncidentStore, local_path
from traindoc_web.held import HELD
from traindoc_web.history import HistoryStore, owner_of
from traindoc_web.markup import probes_html, shared_json, shown, timeline_markdown
from traindoc_web.markup import sources_html as sources_html  # one answer's sources: tests/ import it from here
from traindoc_web.page import NEW_BROWSER
from traindoc_web.page import sources_html as sources_panel
from traindoc_web.upload import upload_slot, uploaded_bundle, without_upload_path
from traindoc_web.worker import Asked, Failed, Refused, Turn, Unread, Worker, answer_turn, stopped_with

DEFAULT_MAX_UPLOAD_MB = 50
log = logging.getLogger("traindoc.web")


@dataclass(frozen=True)
class WebOptions:
    host: str = "127.0.0.1"
    port: int = 7860
    auth: tuple[str, str] | None = None
    max_upload_mb: float = DEFAULT_MAX_UPLOAD_MB
    feedback_db: Path | None = None
    history_db: Path | None = None  # default: web-history.sqlite3 in the data directory
    history_days: float | None = None  # default: TRAINDOC_WEB_HISTORY_DAYS (30); 0 keeps no conversation
    # The server's own host (its GPUs, its processes: other users' jobs) is read only when its operator says so
    # (TRAINDOC_WEB_PROBES=host); a user shows their machine with a probe bundle.
    host_probes: bool = False
    # A message box holds a question and a pasted error, not a log: past this the paste is refused with a line saying
    # to upload it (a 5 MB paste cost seconds of the shared server's own work before any answer, on every yield).
    max_message_chars: int = 200_000
    # A long paste or an upload is answered in a worker process (traindoc_web.worker), within this many seconds
    # (None: traindoc_web.worker.turn_limit_s of the settings); ``worker=False`` answers them on the server's threads.
    worker: bool = True
    long_turn_s: float | None = None


BIG_TURN_CHARS = 65_536  # a turn this long (or with an upload) is answered in the worker process


def long_turn(long: bool) -> Any:
    """A slot among ``LONG_TURNS`` for answering a long paste or an upload (in the worker process, which answers one
    at a time); a short question never waits. Past LONG_WAIT_S it is refused in one line."""
    return upload_slot(long, LONG_TURNS, LONG_WAIT_S, busy="the server is answering other long pastes right now")


LONG_WAIT_S = 120.0


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


# Logs read at once from uploads: a hostile upload (a gzip bomb, a 200 MB line) costs its reader, never everyone's.
UPLOAD_READERS = threading.BoundedSemaphore(2)
LONG_TURNS = threading.BoundedSemaphore(1)  # long pastes and uploads answered one at a time, in the worker process
UPLOAD_WAIT_S = 5.0


Outputs = tuple[list[dict[str, Any]], str, str, list[Any], str, list[Any], Any, dict[str, str]]


class WebChat:
    """The handlers behind the page; plain methods so gradio_client and tests can call them too.

    A turn's state: ``chat`` (the messages shown), ``answers`` (each answer's JSON, the text shown, its sections'
    texts and its turn number), ``turns`` (the conversation as ``ask()`` reads it: agent.conversation's user and
    assistant turns) and ``browser`` (the page's own id and its conversation's, kept in the browser)."""

    def __init__(self, troubleshooter: Troubleshooter, options: WebOptions) -> None:
        self.troubleshooter = troubleshooter
        self.options = options
        feedback = options.feedback_db or troubleshooter.settings.data_dir / "feedback.sqlite3"
        unsaved: list[tuple[str, ConfigError]] = []  # a read-only or full data folder: the chat still answers
        try:
            self.feedback = FeedbackStore(feedback)
        except ConfigError as exc:  # a 👍 says it is not kept
            unsaved.append(("thumbs up/down", exc))
            self.feedback = FeedbackStore.__new__(FeedbackStore)  # its writes fail, each said in one line
            self.feedback.path = feedback
        self.incidents = IncidentStore(local_path(self.feedback.path))  # a 👍 keeps what fixed it (incidents/)
        settings = getattr(troubleshooter, "settings", None)
        days = options.history_days if options.history_days is not None else (settings.web_history_days if settings else 0)
        path = options.history_db or (settings.data_dir / "web-history.sqlite3" if settings else Path("web-history.sqlite3"))
        try:
            self.history = HistoryStore(path, days)
        except ConfigError as exc:
            unsaved.insert(0, ("conversations", exc))
            self.history = HistoryStore(path, 0)
        if unsaved:
            log.warning("%s", _unsaved_line(unsaved))
        # Long pastes and uploads go to a worker process (started on the first one); a model a test scripted in
        # this process cannot go with them, so such a troubleshooter answers them here.
        scripted = getattr(troubleshooter, "_chat_model", None) is not None
        self.worker = (stopped_with(self, Worker(settings, options.long_turn_s))
                       if options.worker and settings is not None and not scripted else None)

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
        if len(text) > self.options.max_message_chars:  # before any work on it: bounded per request
            said = say("web.paste_too_long", language_of(text[:4000]), size=f"{len(text):,}",
                       limit=f"{self.options.max_message_chars:,}", mb=f"{self.options.max_upload_mb:g}")
            yield chat, sources_panel(answers), message, answers, said, turns, log_file, browser
            return
        held = HELD.take(log_file)  # a full disk: the upload was kept in memory (traindoc_web.held)
        bundle = uploaded_bundle(log_file) if held is None else None
        turn = Turn(text=text, upload=None if bundle else log_file, held=held, bundle=bundle, history=list(turns),
                    probes=self.options.host_probes, max_upload_mb=self.options.max_upload_mb)
        events: queue.Queue[Any] = queue.Queue()  # the turn's replies (traindoc_web.worker), then its events
        threading.Thread(target=self._work, args=(turn, events.put), daemon=True).start()
        first = events.get()
        if isinstance(first, Refused):  # "???", an emoji: nothing to answer, and no runbook is guessed for it
            yield chat, sources_panel(answers), "", answers, shown(first.message), turns, log_file, browser
            return
        if not isinstance(first, Asked):  # the upload unread, no slot free, or the turn failed before it was read
            said = without_upload_path(_said(first), log_file)
            chat += [{"role": "user", "content": shown(text or "(log)")}, {"role": "assistant", "content": shown(f"⚠️ {said}")}]
            turns.append(user_turn(text or "(log)"))
            self._save(username, browser, chat, answers, turns)
            yield chat, sources_panel(answers), "", answers, shown(said), turns, None, browser
            return
        paths = first.log_paths
        upload_name = Path(log_file).name if log_file else ""
        chat.append({"role": "user", "content": shown(first.text + (f"\n\n📎 {upload_name}" if upload_name else ""))})
        turn_number = sum(1 for m in chat if m.get("role") == "user")
        turn_start = len(chat)  # where this turn's answer goes
        yield chat, sources_panel(answers), "", answers, "", turns, None, browser
        steps: dict[int, int] = {}
        streamed = -1
        tokens = ""
        asked = user_turn(first.text, log_head=first.log_head, log_errors=first.log_errors,
                          log_name=upload_name if paths else "", log_paths=list(paths))
        while True:
            event = events.get()
            if isinstance(event, BaseException | Failed):
                message_text = without_upload_path(_said(event), log_file)  # the user knows the file by its name
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
                text_shown = shown(answer.shown)  # the brief answer, as the CLI shows it (agent.brief)
                pictured = text_shown + timeline_markdown(answer)  # a triaged job's picture below its verdict
                # The answer right under the question, its verdict in view; the whole answer, the probes and the
                # notices that made it follow it, folded (they used to push the cause and the first fix below the
                # chat's fold).
                made_it = [m for i, m in enumerate(chat[turn_start:], turn_start) if i != streamed]
                whole = [{"role": "assistant", "content": shown(answer.answer),
                          "metadata": {"title": f"📄 {say('slack_full_answer', answer.lang)}", "status": "done"}}
                         ] if answer.shown != answer.answer else []
                chat = [*chat[:turn_start], {"role": "assistant", "content": pictured}, *whole, *made_it]
                answers.append({"index": turn_start, "answer": shared_json(answer),
                                "shown": pictured, "texts": {c.chunk_id: c.text for c in answer.citations},
                                "turn": turn_number})
                turns += [asked, assistant_turn(answer, text_shown)]
                unsaved = self._save(username, browser, chat, answers, turns)
                if is_long(turn) and self.worker is None:  # made here: its heap back to the system, not kept for good
                    return_freed_memory()  # (a full collection holds the GIL: the worker hands back its own)
                yield chat, sources_panel(answers), "", answers, unsaved, turns, None, browser
                return
            yield chat, sources_panel(answers), "", answers, "", turns, None, browser

    def _work(self, turn: Turn, put: Callable[[Any], None]) -> None:
        """One turn, on a thread of its own, its replies to ``put``: an uploaded log holds one of UPLOAD_READERS;
        a long paste or an upload is answered one at a time (LONG_TURNS) by the worker process, off the interpreter
        every user shares; a short question by ``answer_turn`` here. Whatever fails is put too: shown in the chat,
        never a server traceback page."""
        long = is_long(turn)
        try:
            with upload_slot(turn.upload is not None, UPLOAD_READERS, UPLOAD_WAIT_S), long_turn(long):
                if long and self.worker is not None:
                    self.worker.answer(turn, put, _language(turn))
                else:
                    answer_turn(self.troubleshooter, turn, put)
        except BaseException as exc:
            put(exc)

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
              turns: list[Any]) -> str:
        """Keep the conversation; "" when kept, else the one line saying it was not (a full disk, a read-only data
        folder): the answer is shown all the same, and the next turn saves the whole conversation again."""
        first = next((t["content"] for t in turns if t.get("role") == "user"), "")
        try:
            self.history.save(owner_of(username, browser["browser"]), browser["conversation"], first,
                              {"chat": chat, "answers": answers, "turns": turns})
        except (OSError, sqlite3.Error) as exc:
            log.warning("traindoc web: the conversation was not saved: %s", exc)
            return say("web.not_saved", "en", why=_why(exc))
        return ""

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
        return self.rate_and_remember(answers, liked, value)[0]

    def rate_and_remember(self, answers: list[Any], liked: bool, value: Any) -> tuple[str, str]:
        """(the status line, the incident a thumbs-up kept: "" when none): a 👍 on an answer to an error marks
        it as what fixed the job, and its note can be added (``save_note``)."""
        shown = value if isinstance(value, list) else [value]
        texts = {str(v.get("value", v) if isinstance(v, dict) else v) for v in shown}
        for entry in reversed(answers or []):
            if entry.get("shown", entry["answer"]["answer"]) in texts:
                try:
                    self.feedback.record(_answer_from_json(entry["answer"]), 1 if liked else -1, "web")
                    incident = record_fixed(self.incidents, entry["answer"], channel="web") if liked else None
                except (OSError, sqlite3.Error) as exc:  # a full disk: said, and the next 👍/👎 tries again
                    log.warning("traindoc web: feedback was not saved: %s", exc)
                    return say("web.feedback_not_saved", "en", why=_why(exc)), ""
                if incident is None:
                    return "Thanks: feedback saved.", ""
                return ("Thanks: feedback saved, and kept as what fixed this failure: when it comes back, the answer "
                        "will say so. What did you change? (optional, below)"), incident.id
        return "That message is not an answer.", ""

    def save_note(self, incident_id: str, note: str) -> str:
        """What the user changed, kept with the incident their 👍 made (masked)."""
        note = escape_surrogates((note or "").strip())[0]
        if not incident_id or not note:
            return "Nothing to save: type what you changed first."
        if self.incidents.note(incident_id, note) is None:
            return "That incident is no longer kept."
        return "Thanks: kept with the incident."

    def probe_report(self) -> str:
        """The server host's probes, where its operator turned them on (``host_probes``); else how to show yours."""
        if not self.options.host_probes:
            return f"<em>{html.escape(say('web_host_probes_off', 'en'))}</em>"
        from agent.diagnose import ProbeRequest, probe_context
        from tools.registry import run_probes

        context = probe_context(ProbeRequest(text="", timeout_s=self.troubleshooter.settings.probe_timeout_s))
        return probes_html(run_probes(None, context))

    def api_ask(self, question: str) -> dict[str, Any]:
        text = escape_surrogates((question or "").strip())[0]
        if not text:
            return {"error": "empty question"}
        if len(text) > self.options.max_message_chars:  # bounded work per request, as in the chat
            return {"error": say("web.paste_too_long", "en", size=f"{len(text):,}",
                                 limit=f"{self.options.max_message_chars:,}", mb=f"{self.options.max_upload_mb:g}")}
        from tools.redact import mask_json

        turn = Turn(text=text, probes=self.options.host_probes)
        if not is_long(turn):  # a short question: answered here, on the server's threads
            try:
                asked = intake(Received(text=text, probes=self.options.host_probes))
            except NoContent as exc:
                return {"error": exc.message}
            return dict(mask_json(shared_json(self.troubleshooter.ask(asked))))
        replies: list[Any] = []
        try:
            with long_turn(True):
                if self.worker is not None:
                    self.worker.answer(turn, replies.append, _language(turn))
                else:
                    answer_turn(self.troubleshooter, turn, replies.append)
                    return_freed_memory()
        except TraindocError as exc:  # no slot free, past the time limit, the worker died: one line
            return {"error": str(exc)}
        final = next((r.answer for r in replies if isinstance(r, FinalAnswer)), None)
        if final is None:
            return {"error": next((_said(r) for r in replies if isinstance(r, Refused | Failed)), "no answer")}
        return dict(mask_json(shared_json(final)))


def is_long(turn: Turn) -> bool:
    """A turn for the worker process: a long paste, or an upload (a log or a bundle)."""
    return len(turn.text) > BIG_TURN_CHARS or turn.upload is not None or turn.bundle is not None


def _language(turn: Turn) -> Lang:
    """The language a turn's one-line failure is said in: the asker's (agent.intake decides the answer's)."""
    said = turn.text or next((str(t.get("content") or "") for t in reversed(turn.history) if t.get("role") == "user"), "")
    return language_of(said[:4000])


def _said(reply: Any) -> str:
    """A failed turn as its one line: what traindoc says of it, else the kind of internal error."""
    if isinstance(reply, Unread | Refused | Failed):
        return reply.message
    return str(reply) if isinstance(reply, TraindocError) else f"internal error: {type(reply).__name__}"


def _unsaved_line(unsaved: list[tuple[str, ConfigError]]) -> str:
    """What the server will not save and why, in the one line it says at start (not one line per store)."""
    cause = unsaved[0][1].__cause__
    why = _why(cause) if cause is not None else unsaved[0][1].message
    where = getattr(cause, "filename", None) or ""
    place = f" ({where})" if where and str(where) not in why else ""
    what = " and ".join(name for name, _ in unsaved)
    return (f"traindoc web: warning: {what} will not be saved: {why}{place}; answers are given and shown all the same "
            "(set TRAINDOC_DATA_DIR to a writable folder to keep them)")


def _why(exc: BaseException) -> str:
    """A storage failure in a few words: the disk is full, the folder is read-only, else the error itself."""
    from corpus.store import no_space

    if no_space(exc):
        return "the disk is full"
    text = str(exc).lower()
    return "the data folder is read-only" if "read-only" in text or "readonly" in text else str(exc)[:120]


def _answer_from_json(data: dict[str, Any]) -> Answer:
    from agent.answer import Citation

    return Answer(
        question=data["question"], answer=data["answer"],
        citations=[Citation(c["n"], c["source"], c["section"], c["chunk_id"], c["score"]) for c in data["citations"]],
        findings=[], no_match=data["no_match"], backend=data.get("backend", "offline"), lang=data.get("language", "en"),
    )
