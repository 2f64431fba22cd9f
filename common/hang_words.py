"""The words that say a job hangs, in one place.

``HANG_WORDS`` reads a question or a log's last line (jobs, agent, runbooks). The data tables that need the same
words (the retrieval glossary of ``corpus/data/glossary.json``, the conversation subjects of
``agent/data/conversation.json``) write ``TOKEN`` where they mean them, and their readers put the pattern in with
``expand``, case-insensitive whatever flags the reader compiles with. The failure family of a hang
(``corpus/data/error_families.json``) writes the narrower ``NAMED_TOKEN``: the words that name a hang, not the
phrases that describe one.

Letters, not ``\\b``, bound the English words: "hang住" (a Chinese asker's English verb) is a hang too; an identifier
(freeze_vit, hang_timeout) is none, nor is a traceback's ``<frozen importlib._bootstrap>`` frame. 卡 before 在 is no
hang when it names a card (一张卡在跑: one GPU runs).
"""

from __future__ import annotations

import re

TOKEN = "{hang_words}"

HANG_PATTERN = (r"(?<![a-z_<])(?:hang|hangs|hanging|hung|stuck(?:s|ed)?|freez(?:e|es|ing)|froze|frozen|"
                r"no progress|not progressing|"
                r"deadlock(?:s|ed)?|(?:sits?|sitting|waits?|waiting|blocks?|blocked|stays?|staying) (?:there |idle )?forever|"
                r"never (?:returns|finishes|completes|proceeds)|"
                r"stops? (?:outputting|printing|logging)|"
                r"(?:stops|stopped|stalls|stalled) (?:at|on|in) (?:an? |the |some |a certain )?"
                r"(?:iteration|step|epoch|batch)(?! \d+ with))(?![a-z_])|"
                r"卡住|卡死|卡停|卡好久|(?<![张块号])卡在(?![跑用])|挂起|不动|一直在等|一直等待|没有反应|无响应|没有?动静|"
                r"不再(?:输出|打印)|停止(?:输出|打印)")

HANG_WORDS = re.compile(HANG_PATTERN, re.IGNORECASE)

# The words that name a hang outright (hangs, stuck, 卡住), not the phrases that describe one ("stops at step 3",
# "never returns"): the failure family whose sections rank first for a hang reads these, so that a team document's
# own words for a stall ("Rank 549 stops at step") still lead over the generic hang sections. Every one is a hang
# word too.
NAMED_TOKEN = "{hang_words_named}"
NAMED_PATTERN = (r"\b(?:stuck|hangs?|hanging|hung|freez\w*|deadlock\w*)\b|卡住|卡死|卡停|(?<![张块号])卡在(?![跑用])|卡好久|"
                 r"不动了|没有反应")


def expand(pattern: str) -> str:
    """A data table's pattern with ``TOKEN`` replaced by the hang words (case-insensitive, as a group) and
    ``NAMED_TOKEN`` by the words that name a hang (as written)."""
    if TOKEN in pattern:
        pattern = pattern.replace(TOKEN, f"(?i:{HANG_PATTERN})")
    return pattern.replace(NAMED_TOKEN, f"(?:{NAMED_PATTERN})") if NAMED_TOKEN in pattern else pattern
