"""A Slack thread as the conversation's earlier turns, in the form ``Question.history`` takes.

A user's turn keeps the log attached to it (read again from the thread's files, so a follow-up such as "how do
I fix it?" is about that log), and the bot's turn keeps the diagnosis it gave, carried in the answer's message
metadata (``chat.postMessage`` ``metadata``, read back with ``conversations.replies(include_all_metadata)``).
Whether a new message is a follow-up of these turns is decided once, in ``ask()``, for every front end.
The files attached to a message are downloaded here too (size limit) and told apart: logs or a probe bundle.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import urllib.error
import urllib.request
import uuid
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

from agent.conversation import user_turn
from common.errors import TraindocError
from common.private import private_dir
from common.secrets import mask

log = logging.getLogger("traindoc.slack")
MENTION = re.compile(r"<@[A-Z0-9]+>\s*")
EVENT_TYPE = "traindoc_answer"
DIAGNOSIS_CHARS = 400
MAX_READ_LOGS = 200  # thread attachments read, kept by file id so a thread's follow-ups do not download again

# a message's files -> the log keys of its user turn (agent.conversation.user_turn: log_head, log_errors,
# log_name, log_paths: the downloaded copies, re-read by ask() for the whole job's triage)
LogReader = Callable[[list[dict[str, Any]]], dict[str, Any]]
# a Slack file object -> its downloaded copy, or None (too large, or the download failed)
Downloader = Callable[[dict[str, Any]], Path | None]


def answer_metadata(diagnosis: str, no_match: bool) -> dict[str, Any]:
    """What the bot's answer carries for a later turn of its thread (masked: Slack keeps it)."""
    return {"event_type": EVENT_TYPE, "event_payload": {"diagnosis": mask(diagnosis)[:DIAGNOSIS_CHARS],
                                                        "no_match": bool(no_match)}}


def thread_history(messages: list[dict[str, Any]], current_ts: str | None, is_bot: Callable[[dict[str, Any]], bool],
                   read_log: LogReader) -> list[dict[str, Any]]:
    """The thread's turns but ``current_ts``'s, oldest first: user turns with the logs attached to them, the bot's turns
    with their diagnosis."""
    history: list[dict[str, Any]] = []
    for message in sorted(messages, key=lambda m: float(m.get("ts") or 0)):
        if message.get("ts") == current_ts:
            continue
        content = MENTION.sub("", message.get("text") or "").strip()
        if is_bot(message):
            turn: dict[str, Any] = {"role": "assistant", "content": content}
            metadata = message.get("metadata") or {}
            if metadata.get("event_type") == EVENT_TYPE:
                diagnosis = str((metadata.get("event_payload") or {}).get("diagnosis") or "")
                if diagnosis:
                    turn["diagnosis"] = diagnosis
            if content or "diagnosis" in turn:
                history.append(turn)
            continue
        files = [f for f in message.get("files") or [] if isinstance(f, dict)]
        turn = user_turn(content, **(read_log(files) if files else {}))
        if content or len(turn) > 2:
            history.append(turn)
    return history


def read_thread_log(files: list[dict[str, Any]], download: Downloader, cache: OrderedDict[str, dict[str, Any]],
                    lock: threading.Lock) -> dict[str, Any]:
    """The log of files attached earlier in a thread, as a user turn holds it (bundles are not logs); the
    downloaded copies stay for ``ask()`` to triage again, and a thread's follow-ups do not download again
    (``cache``, guarded by ``lock``, keeps what was read by the files' ids)."""
    key = ",".join(str(f.get("id") or f.get("url_private_download") or "") for f in files)
    with lock:
        if key in cache and all(Path(p).is_file() for p in cache[key].get("log_paths", ())):
            return cache[key]
    paths = tuple(p for p in (download(f) for f in files) if p is not None and not is_bundle(p))
    found: dict[str, Any] = {}
    if paths:
        from agent.logs import read_logs

        try:
            reading = read_logs(paths)
        except TraindocError as exc:
            log.info("slack: an earlier attachment of the thread could not be read: %s", exc)
            return found
        names = ", ".join(str(f.get("name") or "log") for f in files)
        found = {"log_head": reading.head, "log_errors": list(reading.errors), "log_name": names,
                 "log_paths": [str(p) for p in paths]}
    with lock:
        cache[key] = found
        while len(cache) > MAX_READ_LOGS:
            cache.popitem(last=False)
    return found


# Slack's own domains, the only hosts a file download carries the bot's token to (over https): url_private is on
# files.slack.com (files.slack-gov.com on GovSlack), and Slack's file links and CDN are on slack-files.com and
# slack-edge.com. A file shared from elsewhere (an external file's url_private) or a redirect to another host gets
# no token: slack-go's GHSA-3q3v-34v2-g88f is the same leak.
SLACK_FILE_DOMAINS = ("slack.com", "slack-gov.com", "slack-files.com", "slack-edge.com")
MAX_REDIRECTS = 5


def token_goes_to(url: str, api_url: str | None = None) -> bool:
    """May the bot's token be sent to ``url``: https on one of Slack's own domains, or the very host (scheme, name
    and port) of SLACK_API_URL, where the operator sends the bot's API calls already (a proxy, a test's fake)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower().rstrip(".")
    if api_url:
        api = urlsplit(api_url)
        if (parts.scheme, host, parts.port) == (api.scheme, (api.hostname or "").lower().rstrip("."), api.port):
            return True
    return parts.scheme == "https" and any(host == domain or host.endswith("." + domain) for domain in SLACK_FILE_DOMAINS)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects come back as responses: the download follows them itself, deciding the token at each hop."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def _open(url: str, bot_token: str, api_url: str | None) -> Any:
    """The response for ``url``, redirects followed by hand (at most ``MAX_REDIRECTS``): the token goes with a request
    only where ``token_goes_to`` allows, so never across a redirect to another host."""
    for _ in range(MAX_REDIRECTS + 1):
        if urlsplit(url).scheme not in ("http", "https"):
            raise OSError("not an http(s) link")
        headers = {"Authorization": f"Bearer {bot_token}"} if token_goes_to(url, api_url) else {}
        try:
            return _OPENER.open(urllib.request.Request(url, headers=headers), timeout=30)  # noqa: S310
        except urllib.error.HTTPError as exc:
            location = exc.headers.get("Location") if 300 <= exc.code < 400 else None
            exc.close()
            if not location:
                raise
            url = urljoin(url, location)
    raise OSError(f"more than {MAX_REDIRECTS} redirects")


def download_attachment(file: dict[str, Any], folder: Path, bot_token: str, max_mb: float,
                        api_url: str | None = None) -> Path | None:
    """``file`` (a Slack file object) downloaded into ``folder`` (0600; a text file with its secrets masked), the
    bot's token sent only to Slack's own hosts; None when it is over ``max_mb``, its link is not Slack's, or it
    cannot be fetched. The caller deletes it once its turn is answered."""
    size = int(file.get("size") or 0)
    limit = max_mb * 1024 * 1024
    url = str(file.get("url_private_download") or file.get("url_private") or "")
    if not url or size > limit:
        log.warning("slack: skipped attachment %s (%d bytes; limit %g MB)", file.get("name"), size, max_mb)
        return None
    if not token_goes_to(url, api_url):  # an external file: its link is someone else's host
        log.warning("slack: skipped attachment %s: its link is not on Slack's file hosts", file.get("name"))
        return None
    target = private_dir(private_dir(folder) / uuid.uuid4().hex[:12]) / Path(str(file.get("name") or "log.txt")).name
    try:
        with _open(url, bot_token, api_url) as response, os.fdopen(
                os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
            copied = 0
            while chunk := response.read(1 << 16):
                copied += len(chunk)
                if copied > limit:
                    raise OSError(f"larger than {max_mb:g} MB")
                out.write(chunk)
        _mask_file(target)
    except OSError as exc:
        log.warning("slack: could not download %s: %s", file.get("name"), mask(str(exc)))
        target.unlink(missing_ok=True)
        return None
    return target


def _mask_file(path: Path) -> None:
    """A downloaded text file rewritten with its secrets masked (a compressed log is kept as it came, 0600 and
    deleted with its turn; a probe bundle is masked where it is read)."""
    from tools.bundle import looks_like_bundle

    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b" or looks_like_bundle(data[:4096]):  # a bundle is masked as it is read (tools.report)
        return
    text = data.decode("utf-8", errors="surrogateescape")
    masked = mask(text)
    if masked != text:
        path.write_bytes(masked.encode("utf-8", errors="surrogateescape"))


def is_bundle(path: Path) -> bool:
    """A `traindoc probe --json` bundle, by a look at its start (it is parsed, within its cap, when used)."""
    from tools.bundle import looks_like_bundle

    try:
        with path.open("rb") as handle:
            return looks_like_bundle(handle.read(4096))
    except OSError:
        return False
