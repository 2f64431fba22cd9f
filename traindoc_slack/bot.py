"""`traindoc slack`: a slack-bolt bridge over the same ``ask()``.

Socket Mode when SLACK_APP_TOKEN is set, else the HTTP Events API (signing secret verified by bolt).
Answers @mentions and DMs in a thread, with the thread as history (its earlier logs and the bot's diagnosis,
``traindoc_slack.thread``); acknowledges with :eyes:, replaced by :white_check_mark: once answered (:x: when it
could not be); posts Block Kit with a plain-text notification line, sources (linked where the corpus records
an upstream), probe findings and feedback buttons whose clicks are thanked and recorded, across restarts.
``/traindoc`` answers ephemerally with a "Share to channel" button. Attached logs and `traindoc probe --json`
bundles are downloaded (size limit) and analysed, and deleted with their turn (what a bot killed mid-turn left is
removed when the next one starts); the bot's own host is probed only when
TRAINDOC_SLACK_PROBES=host. Retries never answer twice; bots are ignored; a per-user rate limit and
a channel allowlist apply. Slack API errors become one log line naming the setting to fix. The options and the
rate limit are in traindoc_slack.options; attachments are downloaded and read by traindoc_slack.thread.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from agent.answer import Answer
from agent.core import Question, Troubleshooter
from agent.feedback import FeedbackStore
from agent.intake import NoContent, Received, has_content, intake
from common.errors import ConfigError, TraindocError
from common.language import language_of, say
from common.redaction import Redactor
from common.surrogates import escape_surrogates
from incidents.record import record_fixed
from incidents.store import IncidentStore, local_path
from traindoc_slack.blocks import answer_blocks, mrkdwn, notification_line, plain, probe_blocks
from traindoc_slack.feedback import read_value
from traindoc_slack.options import RateLimiter, SlackOptions, slack_error_line
from traindoc_slack.ratelimit import RetryAfter
from traindoc_slack.replies import reply
from traindoc_slack.thread import answer_metadata, download_attachment, is_bundle, read_thread_log, thread_history

log = logging.getLogger("traindoc.slack")
MENTION = re.compile(r"<@[A-Z0-9]+>\s*")
SLACK_ID = re.compile(r"[UW][A-Z0-9]{2,20}")  # a user id as Slack sends it: the only mention the bot writes


class SlackBridge:
    def __init__(self, troubleshooter: Troubleshooter, options: SlackOptions) -> None:
        self.troubleshooter = troubleshooter
        self.options = options
        self.rate = RateLimiter(options.rate_per_minute)
        self.feedback = FeedbackStore(options.feedback_db or troubleshooter.settings.data_dir / "feedback.sqlite3")
        self.incidents = IncidentStore(local_path(self.feedback.path))  # a :+1: keeps what fixed it (incidents/)
        self._answers: OrderedDict[str, Answer] = OrderedDict()
        self._read_logs: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._seen_events: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        self.downloads = troubleshooter.settings.cache_dir / "slack"
        self.started = time.time()
        clear_leftovers(self.downloads, self.started)  # a bot killed mid-turn left its turn's attachments
        self.bot_user_id: str | None = None

    # -- bolt wiring --------------------------------------------------------------
    def build_app(self) -> Any:
        from slack_bolt import App
        from slack_sdk import WebClient
        from slack_sdk.errors import SlackApiError

        client = WebClient(token=self.options.bot_token, base_url=_api_base(self.options.api_url))
        client.retry_handlers.append(RetryAfter())  # HTTP 429: wait its Retry-After, a bounded number of times
        try:
            identity = client.auth_test()
            self.bot_user_id = identity.get("user_id")
        except SlackApiError as exc:
            raise ConfigError(slack_error_line(exc, "auth.test")) from exc
        except OSError as exc:
            raise ConfigError(f"slack: cannot reach the Slack API at {client.base_url}: {exc}") from exc
        # bolt's own logger under "slack_bolt", which the CLI quiets unless --debug: otherwise it is named after
        # this file and prints its chatter ("`token` will be unused": bolt reads SLACK_BOT_TOKEN itself)
        app = App(client=client, signing_secret=self.options.signing_secret or "socket-mode",
                  token_verification_enabled=False, request_verification_enabled=self.options.app_token is None,
                  logger=logging.getLogger("slack_bolt.App"))

        @app.error
        def on_error(error: Exception) -> None:
            # one line for the operator, the traceback only with --debug (bolt's default logs a traceback)
            log.error("slack: handling a request failed: %s: %s", type(error).__name__, Redactor().redact(str(error))[:300])
            log.debug("slack: the failure", exc_info=error)

        # Slack retries (X-Slack-Retry-Num) carry the event_id of the first delivery: the handlers answer
        # each event_id once, so a retry never answers twice, yet an event whose first delivery was lost
        # (the bot was restarting) is still answered.
        app.event("app_mention")(self._on_mention)
        app.event("message")(self._on_message)
        app.command("/traindoc")(self._on_command)
        app.action("traindoc_feedback_up")(lambda ack, body, client: self._on_feedback(ack, body, client, 1))
        app.action("traindoc_feedback_down")(lambda ack, body, client: self._on_feedback(ack, body, client, -1))
        app.action("traindoc_fixed_note")(self._on_fixed_note)
        app.action("traindoc_share")(self._on_share)
        app.action("traindoc_full_answer")(self._on_full_answer)
        app.action("traindoc_run_probes")(self._on_run_probes)
        return app

    def _first_time(self, event_id: str | None) -> bool:
        if not event_id:
            return True
        with self._lock:
            if event_id in self._seen_events:
                return False
            self._seen_events[event_id] = None
            while len(self._seen_events) > 5000:
                self._seen_events.popitem(last=False)
            return True

    def _on_mention(self, event: dict[str, Any], body: dict[str, Any], client: Any) -> None:
        if self._first_time(body.get("event_id")):
            self.handle(event, client)

    def _on_message(self, event: dict[str, Any], body: dict[str, Any], client: Any) -> None:
        # Channel messages arrive as app_mention; here only direct messages are answered.
        if event.get("channel_type") == "im" and self._first_time(body.get("event_id")):
            self.handle(event, client)

    # -- the conversation ---------------------------------------------------------
    def handle(self, event: dict[str, Any], client: Any) -> None:
        if event.get("bot_id") or event.get("subtype") in ("bot_message", "message_changed", "message_deleted"):
            return
        user, channel = event.get("user", ""), event.get("channel", "")
        if not user or user == self.bot_user_id:
            return
        if self.options.channels and channel not in self.options.channels and event.get("channel_type") != "im":
            log.info("slack: ignored a message in %s (not in TRAINDOC_SLACK_CHANNELS)", channel)
            return
        thread_ts = event.get("thread_ts") or event.get("ts")
        if not self.rate.allow(user):
            self._call(client.chat_postMessage, "chat.postMessage", channel=channel, thread_ts=thread_ts,
                       text=reply("too_fast", event.get("text") or ""))
            return
        ts = event.get("ts")
        self._call(client.reactions_add, "reactions.add", channel=channel, timestamp=ts, name="eyes")
        skipped: list[str] = []  # attachments not read, said with the answer: it must not read as if they were
        turn = self.downloads / f"{os.getpid()}-{uuid.uuid4().hex}"  # this turn's attachments, deleted once answered
        try:
            question = self._question(event, client, channel, thread_ts, skipped, turn)
            answer = self.troubleshooter.ask(question)
        except TraindocError as exc:
            self._call(client.chat_postMessage, "chat.postMessage", channel=channel, thread_ts=thread_ts,
                       text="\n".join([*skipped, f":warning: {plain(self._unplaced(str(exc)))}"]))
            self._settle(client, channel, ts, "x")
            return
        except Exception as exc:  # never leave the user with only the :eyes: reaction
            log.error("slack: answering failed: %s: %s", type(exc).__name__, Redactor().redact(str(exc))[:300])
            self._call(client.chat_postMessage, "chat.postMessage", channel=channel, thread_ts=thread_ts,
                       text=reply("could_not_answer", event.get("text") or ""))
            self._settle(client, channel, ts, "x")
            return
        finally:
            shutil.rmtree(turn, ignore_errors=True)
        posted = self.post_answer(client, answer, channel=channel, thread_ts=thread_ts, intro="\n".join(skipped) or None)
        if posted:
            self._attach_timeline(client, answer, channel, thread_ts)
        self._settle(client, channel, ts, "white_check_mark" if posted else "x")

    def _unplaced(self, message: str) -> str:
        """A refusal as the thread reads it: a downloaded attachment named by its file name, never by where the
        bot keeps it on its host."""
        return re.sub(re.escape(str(self.downloads)) + r"[/\\](?:[^\s'\":]*[/\\])?", "", message)

    def _attach_timeline(self, client: Any, answer: Answer, channel: str, thread_ts: str | None) -> None:
        """A triaged job's timeline picture (jobs.picture: its log text masked where it was drawn), as a file in the
        thread under the answer; a workspace that refuses it (no files:write) still has the answer."""
        from slack_sdk.errors import SlackRequestError

        from jobs.picture import svg_of

        svg = svg_of(answer.diagnosis, answer.lang)
        if svg is None:
            return
        title = say("picture.legend.timeline", answer.lang)
        try:
            self._call(client.files_upload_v2, "files.upload", channel=channel, thread_ts=thread_ts,
                       content=svg.encode("utf-8"), filename="job-timeline.svg", title=title, alt_txt=title)
        except SlackRequestError as exc:  # the upload URL refused the bytes: said once, the answer stands
            log.error("slack: files.upload failed: %s", Redactor().redact(str(exc))[:300])

    def _settle(self, client: Any, channel: str, ts: str | None, outcome: str) -> None:
        """:eyes: (working on it) gives way to :white_check_mark: (answered) or :x: (could not answer)."""
        self._call(client.reactions_remove, "reactions.remove", channel=channel, timestamp=ts, name="eyes")
        self._call(client.reactions_add, "reactions.add", channel=channel, timestamp=ts, name=outcome)

    def _question(self, event: dict[str, Any], client: Any, channel: str, thread_ts: str | None,
                  skipped: list[str], turn: Path) -> Question:
        text = escape_surrogates(MENTION.sub("", event.get("text") or "").strip())[0]  # a lone one breaks JSON
        history = self._history(client, channel, thread_ts, event.get("ts"), turn)
        bundle = None
        paths: tuple[Path, ...] = ()
        for file in event.get("files") or []:
            path = download_attachment(file, turn, self.options.bot_token, self.options.max_file_mb, self.options.api_url)
            if path is None:  # said with the answer: it must not read as if the file had been read
                skipped.append(self._skipped_attachment(file, text))
                continue
            if is_bundle(path):
                bundle = path
            else:
                paths += (path,)  # several attached logs (one per rank) are one job: the intake reads them once
        if not has_content(text) and not paths and bundle is None:  # a bare mention, or only a file it could not read
            raise NoContent(say("intake.no_content", "zh" if text and language_of(text) == "zh" else "en"))
        question = intake(Received(text=text, logs=paths, bundle=bundle, history=history, probes=self.options.host_probes))
        # A log with nothing the intake could read still asks about the job.
        return question if question.text.strip() else replace(question, text=say("job_question", question.language))

    def _skipped_attachment(self, file: dict[str, Any], asked: str) -> str:
        """One line saying why an attached file was not read (over the size limit, or the download failed)."""
        name = plain(Path(str(file.get("name") or "the attachment")).name)
        too_big = int(file.get("size") or 0) > self.options.max_file_mb * 1024 * 1024
        return (reply("attachment_too_big", asked, name=name, limit=f"{self.options.max_file_mb:g}") if too_big
                else reply("attachment_failed", asked, name=name))

    def _history(self, client: Any, channel: str, thread_ts: str | None, ts: str | None, turn: Path) -> list[dict[str, Any]]:
        """The thread's earlier turns: the logs attached to them (read again) and the bot's diagnoses."""
        if not thread_ts or thread_ts == ts:
            return []
        replies = self._call(client.conversations_replies, "conversations.replies", channel=channel, ts=thread_ts,
                             limit=50, include_all_metadata=True)
        messages = [m for m in (replies or {}).get("messages", []) if isinstance(m, dict)]
        download = partial(download_attachment, folder=turn, bot_token=self.options.bot_token,
                           max_mb=self.options.max_file_mb, api_url=self.options.api_url)
        read_log = partial(read_thread_log, download=download, cache=self._read_logs, lock=self._lock)
        return thread_history(messages, ts, self._is_bot, read_log)

    def _is_bot(self, message: dict[str, Any]) -> bool:
        return bool(message.get("bot_id")) or (self.bot_user_id is not None and message.get("user") == self.bot_user_id)

    def post_answer(self, client: Any, answer: Answer, *, channel: str, thread_ts: str | None,
                    intro: str | None = None) -> bool:
        """Post ``answer`` (in a thread, or to the channel when shared); True when Slack took it."""
        answer_id = self._remember(answer)
        text, blocks = answer_blocks(answer, answer_id, probes_button=self.options.host_probes)
        if intro:
            blocks = [{"type": "context", "elements": [mrkdwn(intro)]}, *blocks]
        # no unfurling: a link quoted from a log must not make Slack fetch it
        posted = self._call(client.chat_postMessage, "chat.postMessage", channel=channel, thread_ts=thread_ts, text=text,
                            blocks=blocks, unfurl_links=False, unfurl_media=False,
                            metadata=answer_metadata(_diagnosis(answer), answer.no_match))
        return posted is not None

    def _remember(self, answer: Answer) -> str:
        """Keep the last answers so feedback buttons can find them (bounded)."""
        answer_id = uuid.uuid4().hex[:12]
        with self._lock:
            self._answers[answer_id] = answer
            while len(self._answers) > 1000:
                self._answers.popitem(last=False)
        return answer_id

    def _on_command(self, ack: Any, command: dict[str, Any], respond: Any) -> None:
        ack()
        text = (command.get("text") or "").strip()
        if not text:
            respond(text=reply("usage"), response_type="ephemeral")
            return
        if self.options.channels and command.get("channel_id") not in self.options.channels:
            respond(text=reply("only_configured", text), response_type="ephemeral")
            return
        if not self.rate.allow(command.get("user_id", "")):
            respond(text=reply("too_fast", text), response_type="ephemeral")
            return
        try:
            asked = intake(Received(text=text, probes=self.options.host_probes))
        except NoContent as exc:  # "/traindoc ???": nothing to answer
            respond(text=exc.message, response_type="ephemeral")
            return
        answer = self.troubleshooter.ask(asked)
        answer_id = self._remember(answer)
        ephemeral = self.options.ephemeral_commands
        fallback, blocks = answer_blocks(answer, answer_id, probes_button=self.options.host_probes, share_button=ephemeral)
        respond(text=fallback, blocks=blocks, response_type="ephemeral" if ephemeral else "in_channel")

    def _clicked(self, body: dict[str, Any]) -> tuple[str, Answer | None, str, str, str | None]:
        """(answer id, the answer, channel, user, thread) of a button click: the answer this process holds, else
        the one the button carries (the bot restarted since it posted it)."""
        value = (body.get("actions") or [{}])[0].get("value", "")
        answer_id, carried = read_value(str(value))
        with self._lock:
            answer = self._answers.get(answer_id) or carried
        channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id", "")
        user = (body.get("user") or {}).get("id", "")
        message = body.get("message") or {}
        return answer_id, answer, channel, user, message.get("thread_ts") or message.get("ts")

    def _on_feedback(self, ack: Any, body: dict[str, Any], client: Any, rating: int) -> None:
        ack()
        answer_id, answer, channel, user, thread_ts = self._clicked(body)
        if answer is None:  # a button from before buttons carried their answer: said, not silently dropped
            log.info("slack: feedback for an answer this process no longer holds (%s)", answer_id)
            key, asked = "feedback_lost", ""
        else:
            self.feedback.record(answer, rating, "slack")
            key, asked = ("thanks_up" if rating > 0 else "thanks_down"), answer.question
        incident = record_fixed(self.incidents, answer, channel="slack") if answer is not None and rating > 0 else None
        if channel and user:
            # a kept incident: the thanks says so and takes a note of what was changed (traindoc_fixed_note)
            extra = {"blocks": fixed_blocks(incident.id, asked)} if incident is not None else {}
            self._call(client.chat_postEphemeral, "chat.postEphemeral", channel=channel, user=user,
                       text=reply("thanks_fixed" if incident is not None else key, asked),
                       **({"thread_ts": thread_ts} if thread_ts else {}), **extra)

    def _on_fixed_note(self, ack: Any, body: dict[str, Any], client: Any) -> None:
        """What the user typed into the thanks for a :+1: (what they changed): kept with that incident, masked."""
        ack()
        action = (body.get("actions") or [{}])[0]
        incident_id = str(action.get("block_id", "")).removeprefix(NOTE_BLOCK)
        note = escape_surrogates(str(action.get("value") or "").strip())[0]
        saved = bool(note) and self.incidents.note(incident_id, note) is not None
        channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id", "")
        user = (body.get("user") or {}).get("id", "")
        if channel and user:
            self._call(client.chat_postEphemeral, "chat.postEphemeral", channel=channel, user=user,
                       text=reply("note_saved" if saved else "note_lost", note))

    def _held_or_asked_again(self, answer_id: str, answer: Answer) -> Answer:
        """The answer this process holds; after a restart the button carried only its summary, so the (masked)
        question is answered again rather than a summary posted."""
        with self._lock:
            held = answer_id in self._answers
        if held:
            return answer
        return self.troubleshooter.ask(intake(Received(text=answer.question, probes=self.options.host_probes)))

    def _on_share(self, ack: Any, body: dict[str, Any], client: Any, respond: Any) -> None:
        """Post an ephemeral /traindoc answer to the channel, saying who shared it and what was asked."""
        ack()
        answer_id, answer, channel, user, _ = self._clicked(body)
        if answer is None or not channel:
            return
        answer = self._held_or_asked_again(answer_id, answer)
        who = f"<@{user}>" if SLACK_ID.fullmatch(user) else "someone"
        intro = reply("shared", answer.question, user=who, question=plain(answer.question)[:300])
        if self.post_answer(client, answer, channel=channel, thread_ts=None, intro=intro):
            respond(delete_original=True)
        else:
            respond(text=reply("share_failed", answer.question, error="chat.postMessage"), response_type="ephemeral",
                    replace_original=False)

    def _on_full_answer(self, ack: Any, body: dict[str, Any], client: Any) -> None:
        """The whole answer (checks, every fix, notes), posted in the thread of the brief one it belongs to."""
        ack()
        answer_id, answer, channel, _, thread_ts = self._clicked(body)
        if answer is None or not channel:
            return
        answer = self._held_or_asked_again(answer_id, answer)
        text, blocks = answer_blocks(answer, answer_id, probes_button=False, full=True)
        blocks = [b for b in blocks if b.get("type") != "actions"]  # its buttons are on the brief answer above
        self._call(client.chat_postMessage, "chat.postMessage", channel=channel, thread_ts=thread_ts, text=text,
                   blocks=blocks, unfurl_links=False, unfurl_media=False)

    def _on_run_probes(self, ack: Any, body: dict[str, Any], client: Any) -> None:
        ack()
        if not self.options.host_probes:
            return
        from agent.diagnose import ProbeRequest, probe_context
        from tools.registry import run_probes

        results = run_probes(None, probe_context(ProbeRequest(text="", timeout_s=self.troubleshooter.settings.probe_timeout_s)))
        channel = (body.get("channel") or {}).get("id", "")
        message = body.get("message") or {}
        self._call(client.chat_postMessage, "chat.postMessage", channel=channel,
                   thread_ts=message.get("thread_ts") or message.get("ts"), text="Probe report", blocks=probe_blocks(results))

    def _call(self, method: Any, action: str, **kwargs: Any) -> Any:
        from slack_sdk.errors import SlackApiError

        try:
            return method(**kwargs)
        except SlackApiError as exc:
            log.error("%s", slack_error_line(exc, action))
        except OSError as exc:
            log.error("slack: %s failed: cannot reach Slack (%s): check SLACK_API_URL and the network", action, exc)
        return None


NOTE_BLOCK = "traindoc_incident:"  # the note field's block id: this prefix, then the incident's id


def clear_leftovers(downloads: Path, started: float) -> int:
    """Remove what a bot before this one left in ``downloads`` (its turn was killed before it could delete its
    attachments): every entry last changed before ``started``, except the turns of another bot still running on
    the same data directory (a turn's folder is named after its process id). Returns how many were removed."""
    try:
        entries = list(os.scandir(downloads))
    except OSError:  # no folder yet: nothing was ever left
        return 0
    removed = 0
    for entry in entries:
        try:
            stat = entry.stat(follow_symlinks=False)
            owner = entry.name.split("-", 1)[0]
            if stat.st_mtime >= started or (owner.isdigit() and int(owner) != os.getpid() and _running(int(owner))):
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:  # a file or a link: the link goes, never what it points to
                os.unlink(entry.path)
            removed += 1
        except OSError as exc:
            log.warning("slack: could not remove %s, left by an earlier run: %s", entry.name, exc)
    if removed:
        log.info("slack: removed %d attachment folder(s) an earlier run left in %s", removed, downloads)
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # alive, another user's (EPERM)
        return True
    return True


def fixed_blocks(incident_id: str, asked: str) -> list[dict[str, Any]]:
    """The thanks for a :+1: that kept an incident, with a field for what the user changed (Enter saves it)."""
    return [{"type": "section", "text": mrkdwn(plain(reply("thanks_fixed", asked)))},
            {"type": "input", "block_id": f"{NOTE_BLOCK}{incident_id}", "dispatch_action": True, "optional": True,
             "label": {"type": "plain_text", "text": reply("fixed_note_label", asked)},
             "element": {"type": "plain_text_input", "action_id": "traindoc_fixed_note",
                         "placeholder": {"type": "plain_text", "text": reply("fixed_note_hint", asked)}}}]


def _diagnosis(answer: Answer) -> str:
    """The bot's diagnosis as a later turn of the thread reads it (agent.conversation), else its verdict line."""
    from agent.conversation import diagnosis_text

    return diagnosis_text(answer) or notification_line(answer)


def _api_base(url: str | None) -> str:
    if not url:
        return "https://slack.com/api/"
    return url if url.endswith("/") else url + "/"


def run(troubleshooter: Troubleshooter, options: SlackOptions) -> None:
    bridge = SlackBridge(troubleshooter, options)
    app = bridge.build_app()
    if options.app_token:
        from slack_bolt.adapter.socket_mode import SocketModeHandler

        log.warning("traindoc slack: Socket Mode")
        SocketModeHandler(app, options.app_token).start()
        return
    serve_http(app, options.host, options.port)


def serve_http(app: Any, host: str, port: int) -> None:
    """The Events API over HTTP on host:port (POST /slack/events), threaded so Slack gets its ack at once."""
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    from slack_bolt.adapter.wsgi import SlackRequestHandler

    class _Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True

    class _Quiet(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            log.debug(format, *args)

    handler = SlackRequestHandler(app)
    server = make_server(host, port, handler, server_class=_Server, handler_class=_Quiet)
    log.warning("traindoc slack: HTTP Events API on http://%s:%d/slack/events", host, port)
    server.serve_forever()
