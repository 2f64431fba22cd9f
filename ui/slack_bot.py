"""`traindoc slack`: a slack-bolt bridge over the same ``ask()``.

Socket Mode when SLACK_APP_TOKEN is set, else the HTTP Events API (signing secret verified by bolt).
Answers @mentions and DMs in a thread, with the thread as history; acknowledges with :eyes:; posts
Block Kit with sources, probe findings and feedback buttons. Attached logs and `traindoc probe --json`
bundles are downloaded (size limit) and analysed; the bot's own host is probed only when
TRAINDOC_SLACK_PROBES=host. Retries never answer twice; bots are ignored; a per-user rate limit and
a channel allowlist apply. Slack API errors become one log line naming the setting to fix.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import urllib.request
import uuid
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.answer import Answer
from agent.core import Question, Troubleshooter
from agent.feedback import FeedbackStore
from common.errors import ConfigError, TraindocError
from common.redaction import Redactor
from common.settings import Settings
from ui.slack_blocks import answer_blocks, plain, probe_blocks

log = logging.getLogger("traindoc.slack")
MENTION = re.compile(r"<@[A-Z0-9]+>\s*")
HINTS = {
    "invalid_auth": "SLACK_BOT_TOKEN is wrong or revoked: copy the Bot User OAuth Token (xoxb-...) again",
    "not_authed": "SLACK_BOT_TOKEN is not set",
    "account_inactive": "SLACK_BOT_TOKEN belongs to a deleted app or user: reinstall the app",
    "channel_not_found": "the channel does not exist or the bot cannot see it: check TRAINDOC_SLACK_CHANNELS and invite the bot",
    "not_in_channel": "invite the bot to the channel (/invite @traindoc)",
    "missing_scope": "add the missing scope in deploy/slack-manifest.yaml (OAuth scopes) and reinstall the app",
    "ratelimited": "Slack rate-limited the bot: slow down or raise TRAINDOC_SLACK_RATE",
}


@dataclass(frozen=True)
class SlackOptions:
    bot_token: str
    signing_secret: str | None = None
    app_token: str | None = None
    api_url: str | None = None
    host: str = "127.0.0.1"
    port: int = 3000
    channels: frozenset[str] = frozenset()
    host_probes: bool = False
    rate_per_minute: int = 6
    max_file_mb: float = 20
    feedback_db: Path | None = None
    ephemeral_commands: bool = True

    @classmethod
    def from_settings(cls, settings: Settings, port: int, host: str) -> SlackOptions:
        """The bot's options from the one settings object (SLACK_* tokens, TRAINDOC_SLACK_*)."""
        if not settings.slack_bot_token:
            raise ConfigError("SLACK_BOT_TOKEN is not set", hint="see README: Slack bot")
        if not settings.slack_app_token and not settings.slack_signing_secret:
            raise ConfigError("set SLACK_APP_TOKEN (Socket Mode) or SLACK_SIGNING_SECRET (HTTP Events API)")
        return cls(
            bot_token=settings.slack_bot_token, signing_secret=settings.slack_signing_secret,
            app_token=settings.slack_app_token, api_url=settings.slack_api_url, host=host, port=port,
            channels=frozenset(settings.slack_channels), host_probes=settings.slack_probes,
            rate_per_minute=settings.slack_rate, max_file_mb=settings.slack_max_file_mb,
            feedback_db=settings.feedback_path, ephemeral_commands=settings.slack_command_visibility != "channel",
        )

    @classmethod
    def from_env(cls, env: dict[str, str], port: int, host: str) -> SlackOptions:
        return cls.from_settings(Settings.from_env(env), port, host)


def slack_error_line(exc: Exception, action: str) -> str:
    response = getattr(exc, "response", None)
    code = ""
    if response is not None:
        try:
            code = str(response.get("error", ""))
        except Exception:  # a response object without .get
            code = ""
    hint = HINTS.get(code, "see the Slack API error above")
    if code == "missing_scope" and response is not None:
        needed = response.get("needed")
        if needed:
            hint = f"add the scope {needed} in deploy/slack-manifest.yaml and reinstall the app"
    return f"slack: {action} failed: {code or type(exc).__name__}: {hint}"


@dataclass
class RateLimiter:
    per_minute: int
    _hits: dict[str, deque[float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def allow(self, user: str, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        with self._lock:
            hits = self._hits.setdefault(user, deque())
            while hits and now - hits[0] > 60:
                hits.popleft()
            if len(hits) >= self.per_minute:
                return False
            hits.append(now)
            return True


class SlackBridge:
    def __init__(self, troubleshooter: Troubleshooter, options: SlackOptions) -> None:
        self.troubleshooter = troubleshooter
        self.options = options
        self.rate = RateLimiter(options.rate_per_minute)
        self.feedback = FeedbackStore(options.feedback_db or troubleshooter.settings.data_dir / "feedback.sqlite3")
        self._answers: OrderedDict[str, Answer] = OrderedDict()
        self._seen_events: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        self.downloads = troubleshooter.settings.cache_dir / "slack"
        self.bot_user_id: str | None = None

    # -- bolt wiring --------------------------------------------------------------
    def build_app(self) -> Any:
        from slack_bolt import App
        from slack_sdk import WebClient
        from slack_sdk.errors import SlackApiError

        client = WebClient(token=self.options.bot_token, base_url=_api_base(self.options.api_url))
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
        app.action("traindoc_feedback_up")(lambda ack, body: self._on_feedback(ack, body, 1))
        app.action("traindoc_feedback_down")(lambda ack, body: self._on_feedback(ack, body, -1))
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
                       text="You are asking faster than I can answer: try again in a minute.")
            return
        self._call(client.reactions_add, "reactions.add", channel=channel, timestamp=event.get("ts"), name="eyes")
        try:
            question = self._question(event, client, channel, thread_ts)
            answer = self.troubleshooter.ask(question)
        except TraindocError as exc:
            self._call(client.chat_postMessage, "chat.postMessage", channel=channel, thread_ts=thread_ts,
                       text=f":warning: {plain(str(exc))}")
            return
        except Exception as exc:  # never leave the user with only the :eyes: reaction
            log.error("slack: answering failed: %s: %s", type(exc).__name__, Redactor().redact(str(exc))[:300])
            self._call(client.chat_postMessage, "chat.postMessage", channel=channel, thread_ts=thread_ts,
                       text=":warning: traindoc could not answer this one; the error is in the bot's log.")
            return
        self.post_answer(client, answer, channel=channel, thread_ts=thread_ts)

    def _question(self, event: dict[str, Any], client: Any, channel: str, thread_ts: str | None) -> Question:
        text = MENTION.sub("", event.get("text") or "").strip()
        history = self._history(client, channel, thread_ts, event.get("ts"))
        head, errors, bundle, job = "", list[str](), None, None
        paths: tuple[Path, ...] = ()
        for file in event.get("files") or []:
            path = self._download(file)
            if path is None:
                continue
            if _is_bundle(path):
                bundle = path
            else:
                paths += (path,)
        if paths:  # several attached logs (one per rank) are one job
            from agent.logs import read_logs

            reading = read_logs(paths, question=text)
            head, errors, job = reading.head, reading.errors, reading.diagnosis
        if not text:
            text = errors[0] if errors else "what is wrong with this job?"
        probes = bundle is not None or self.options.host_probes
        return Question(text=text, log_head=head, log_errors=errors, log_paths=paths if probes else (),
                        bundle=bundle, probes=probes, history=history, job=job)

    def _history(self, client: Any, channel: str, thread_ts: str | None, ts: str | None) -> list[dict[str, str]]:
        if not thread_ts or thread_ts == ts:
            return []
        reply = self._call(client.conversations_replies, "conversations.replies", channel=channel, ts=thread_ts, limit=50)
        history = []
        for message in (reply or {}).get("messages", []):
            if message.get("ts") == ts:
                continue
            role = "assistant" if message.get("bot_id") or message.get("user") == self.bot_user_id else "user"
            content = MENTION.sub("", message.get("text") or "").strip()
            if content:
                history.append({"role": role, "content": content})
        return history

    def _download(self, file: dict[str, Any]) -> Path | None:
        size = int(file.get("size") or 0)
        limit = self.options.max_file_mb * 1024 * 1024
        url = file.get("url_private_download") or file.get("url_private")
        if not url or size > limit:
            log.warning("slack: skipped attachment %s (%d bytes; limit %g MB)", file.get("name"), size, self.options.max_file_mb)
            return None
        self.downloads.mkdir(parents=True, exist_ok=True)
        target = self.downloads / f"{uuid.uuid4().hex}-{Path(str(file.get('name') or 'log.txt')).name}"
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.options.bot_token}"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response, target.open("wb") as out:  # noqa: S310
                copied = 0
                while chunk := response.read(1 << 16):
                    copied += len(chunk)
                    if copied > limit:
                        raise OSError(f"larger than {self.options.max_file_mb:g} MB")
                    out.write(chunk)
        except OSError as exc:
            log.warning("slack: could not download %s: %s", file.get("name"), exc)
            target.unlink(missing_ok=True)
            return None
        return target

    def post_answer(self, client: Any, answer: Answer, *, channel: str, thread_ts: str | None) -> None:
        answer_id = self._remember(answer)
        text, blocks = answer_blocks(answer, answer_id, probes_button=self.options.host_probes)
        # no unfurling: a link quoted from a log must not make Slack fetch it
        self._call(client.chat_postMessage, "chat.postMessage", channel=channel, thread_ts=thread_ts, text=text, blocks=blocks,
                   unfurl_links=False, unfurl_media=False)

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
            respond(text="Usage: /traindoc QUESTION (for example: /traindoc why is NCCL hanging)", response_type="ephemeral")
            return
        if self.options.channels and command.get("channel_id") not in self.options.channels:
            respond(text="traindoc answers only in its configured channels (TRAINDOC_SLACK_CHANNELS).",
                    response_type="ephemeral")
            return
        if not self.rate.allow(command.get("user_id", "")):
            respond(text="You are asking faster than I can answer: try again in a minute.", response_type="ephemeral")
            return
        answer = self.troubleshooter.ask(Question(text=text, probes=self.options.host_probes))
        answer_id = self._remember(answer)
        fallback, blocks = answer_blocks(answer, answer_id, probes_button=self.options.host_probes)
        respond(text=fallback, blocks=blocks, response_type="ephemeral" if self.options.ephemeral_commands else "in_channel")

    def _on_feedback(self, ack: Any, body: dict[str, Any], rating: int) -> None:
        ack()
        answer_id = (body.get("actions") or [{}])[0].get("value", "")
        answer = self._answers.get(answer_id)
        if answer is None:
            log.info("slack: feedback for an answer this process no longer holds (%s)", answer_id)
            return
        self.feedback.record(answer, rating, "slack")

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


def _api_base(url: str | None) -> str:
    if not url:
        return "https://slack.com/api/"
    return url if url.endswith("/") else url + "/"


def _is_bundle(path: Path) -> bool:
    """A `traindoc probe --json` bundle, by a look at its start (it is parsed, within its cap, when used)."""
    from tools.bundle import looks_like_bundle

    try:
        with path.open("rb") as handle:
            return looks_like_bundle(handle.read(4096))
    except OSError:
        return False


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
