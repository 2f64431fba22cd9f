"""What the bot says in Slack besides answers, in the asker's language (as ``common.language`` reads it): the
``slack.*`` phrases of the phrase book (``common/data/phrases/slack.json``)."""

from __future__ import annotations

from common.language import language_of, say


def reply(key: str, asked: str = "", **values: str) -> str:
    """The ``key`` reply in the language of ``asked`` (the question it is about), with ``values`` filled in."""
    return say(f"slack.{key}", "zh" if asked and language_of(asked) == "zh" else "en", **values)
