"""What the bot says in Slack besides answers, per language (the asker's, as ``common.language`` reads it)."""

from __future__ import annotations

from common.language import language_of

REPLIES: dict[str, dict[str, str]] = {
    "thanks_up": {
        "en": "Thanks, recorded: this answer helped.",
        "zh": "谢谢，已记录：这个回答有帮助。",
    },
    "thanks_down": {
        "en": "Thanks, recorded: this answer did not help. Attaching the log (or a `traindoc probe --json` bundle) "
              "and saying what you tried gets a better one.",
        "zh": "谢谢，已记录：这个回答没有帮助。附上日志（或 `traindoc probe --json` 的结果）并说明已经试过什么，能得到更好的回答。",
    },
    "feedback_lost": {
        "en": "Thanks, but this answer was posted before the bot was updated and its button carries nothing to record: "
              "rate the answer to a new question instead.",
        "zh": "谢谢，但这个回答发布于机器人更新之前，按钮里没有可记录的内容：请对新问题的回答评分。",
    },
    "shared": {
        "en": "{user} shared traindoc's answer to: {question}",
        "zh": "{user} 分享了 traindoc 对这个问题的回答：{question}",
    },
    "too_fast": {
        "en": "You are asking faster than I can answer: try again in a minute.",
        "zh": "提问太快了，我来不及回答：请一分钟后再试。",
    },
    "could_not_answer": {
        "en": ":warning: traindoc could not answer this one; the error is in the bot's log.",
        "zh": ":warning: traindoc 没能回答这个问题；错误记录在机器人的日志里。",
    },
    "usage": {
        "en": "Usage: /traindoc QUESTION (for example: /traindoc why is NCCL hanging)",
        "zh": "用法：/traindoc 问题（例如：/traindoc 为什么 NCCL 卡住了）",
    },
    "only_configured": {
        "en": "traindoc answers only in its configured channels (TRAINDOC_SLACK_CHANNELS).",
        "zh": "traindoc 只在配置的频道中回答（TRAINDOC_SLACK_CHANNELS）。",
    },
    "share_failed": {
        "en": "Could not post to this channel ({error}): invite the bot with /invite @traindoc, then share again.",
        "zh": "无法发到这个频道（{error}）：先用 /invite @traindoc 邀请机器人，再分享。",
    },
}


def reply(key: str, asked: str = "", **values: str) -> str:
    """The ``key`` reply in the language of ``asked`` (the question it is about), with ``values`` filled in."""
    lang = "zh" if asked and language_of(asked) == "zh" else "en"
    return REPLIES[key][lang].format(**values)
