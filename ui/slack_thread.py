"""A Slack thread as the conversation's earlier turns, in the form ``Question.history`` takes.

A user's turn keeps the log attached to it (read again from the thread's files, so a follow-up such as "how do
I fix it?" is about that log), and the bot's turn keeps the diagnosis it gave, carried in the answer's message
metadata (``chat.postMessage`` ``metadata``, read back with ``conversations.replies(include_all_metadata)``).
Whether a new message is a follow-up of these turns is decided once, in ``ask()``, for every front end.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from agent.conversation import user_turn
from common.secrets import mask

MENTION = re.compile(r"<@[A-Z0-9]+>\s*")
EVENT_TYPE = "traindoc_answer"
DIAGNOSIS_CHARS = 400

# a message's files -> the log keys of its user turn (agent.conversation.user_turn: log_head, log_errors,
# log_name, log_paths: the downloaded copies, re-read by ask() for the whole job's triage)
LogReader = Callable[[list[dict[str, Any]]], dict[str, Any]]


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
