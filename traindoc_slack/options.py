"""The Slack bot's options (from the one settings object), its per-user rate limit, and a Slack API error as one
log line naming the setting to fix."""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from common.errors import ConfigError
from common.settings import Settings

HINTS = {
    "invalid_auth": "SLACK_BOT_TOKEN is wrong or revoked: copy the Bot User OAuth Token (xoxb-...) again",
    "not_authed": "SLACK_BOT_TOKEN is not set",
    "account_inactive": "SLACK_BOT_TOKEN belongs to a deleted app or user: reinstall the app",
    "channel_not_found": "the channel does not exist or the bot cannot see it: check TRAINDOC_SLACK_CHANNELS and invite the bot",
    "not_in_channel": "invite the bot to the channel (/invite @traindoc)",
    "missing_scope": "add the missing scope in deploy/slack-manifest.yaml (OAuth scopes) and reinstall the app",
    "ratelimited": ("Slack still rate-limited the bot after waiting its Retry-After: lower TRAINDOC_SLACK_RATE "
                    "(questions per user per minute) or TRAINDOC_SLACK_CHANNELS to fewer channels"),
}
# Slack asked for a wait longer than the bot's longest (traindoc_slack.ratelimit.MAX_WAIT_S): it gave up at once
TOO_LONG_A_WAIT = ("Slack asked the bot to wait {wait:g} s (Retry-After), longer than the {most:g} s it waits, so it "
                   "gave up at once without trying again: lower TRAINDOC_SLACK_RATE (questions per user per minute) "
                   "or TRAINDOC_SLACK_CHANNELS to fewer channels")


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
    if code == "ratelimited" and (wait := _retry_after(response)) is not None:
        from traindoc_slack.ratelimit import MAX_WAIT_S

        if wait > MAX_WAIT_S:
            hint = TOO_LONG_A_WAIT.format(wait=wait, most=MAX_WAIT_S)
    if code == "missing_scope" and response is not None:
        needed = response.get("needed")
        if needed:
            hint = f"add the scope {needed} in deploy/slack-manifest.yaml and reinstall the app"
    return f"slack: {action} failed: {code or type(exc).__name__}: {hint}"


def _retry_after(response: object) -> float | None:
    """The Retry-After (seconds) of a refused call's response, None where it names none."""
    headers = getattr(response, "headers", None) or {}
    try:
        value = next((v for k, v in dict(headers).items() if str(k).lower() == "retry-after"), None)
        value = value[0] if isinstance(value, list) and value else value
        return None if value is None else max(0.0, float(str(value).strip()))
    except (TypeError, ValueError):
        return None


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
