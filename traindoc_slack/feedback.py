"""What a Slack button carries, so that a click is understood after the bot restarted.

A button's ``value`` (at most 2,000 characters, Block Kit) holds what the feedback store keeps of an answer,
already masked the way the store masks it: the question, the answer's one-line summary, the cited sections
(file name, heading path, chunk id), whether it was a no-match, the backend, and what a :+1: keeps as a resolved
incident (``incidents/``): the failure's kind, first messages, hosts and GPUs, and traindoc's first fix. No secret
(masked) and no more of the question than the store keeps. The running bot still prefers the whole answer it holds
in memory.
"""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import Any

from agent.answer import Answer, Citation
from common.secrets import mask

VALUE_LIMIT = 2000  # Block Kit: a button's value
QUESTION_CHARS = 600
SECTION_CHARS = 160
MAX_CITED = 5
FAILURE_MESSAGES = 2  # of an incident's identifying messages, the first ones
FAILURE_CHARS = 200


def button_value(answer: Answer, answer_id: str, summary: str) -> str:
    """The JSON a feedback or share button carries (masked, within Slack's limit)."""
    cited = [[PurePath(c.source).name, mask(c.section)[:SECTION_CHARS], c.chunk_id] for c in answer.citations[:MAX_CITED]]
    data: dict[str, Any] = {"id": answer_id, "q": mask(answer.question)[:QUESTION_CHARS], "a": mask(summary)[:300],
                            "c": cited, "nm": int(answer.no_match), "b": answer.backend}
    if (failure := getattr(answer, "failure", None)) is not None:
        from incidents.record import resolution

        data["f"] = {"k": failure.kind, "m": [mask(m)[:FAILURE_CHARS] for m in failure.messages[:FAILURE_MESSAGES]],
                     "h": list(failure.hosts[:3]), "g": list(failure.gpus[:3]), "x": mask(resolution(answer)[1])[:FAILURE_CHARS]}
    value = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    while len(value) > VALUE_LIMIT and (data["c"] or len(data["q"]) > 80 or "f" in data):
        if data["c"]:
            data["c"].pop()
        elif len(data["q"]) > 80:
            data["q"] = data["q"][: len(data["q"]) // 2]
        else:
            del data["f"]
        value = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return value[:VALUE_LIMIT]


def read_value(value: str) -> tuple[str, Answer | None]:
    """(answer id, the answer as the button recorded it); an id alone (an older message) gives no answer."""
    try:
        data = json.loads(value)
    except ValueError:
        return value, None
    if not isinstance(data, dict):
        return value, None
    try:
        citations = [Citation(n=i, source=str(name), section=str(section), chunk_id=str(chunk), score=0.0)
                     for i, (name, section, chunk) in enumerate(data.get("c") or [], 1)]
        answer = Answer(question=str(data.get("q", "")), answer=str(data.get("a", "")), citations=citations,
                        findings=[], no_match=bool(data.get("nm")), backend=str(data.get("b") or "offline"))
    except (TypeError, ValueError):
        return str(data.get("id", "")), None
    answer.answer = str(data.get("a", ""))  # what the button carried, not an answer composed again around it
    if isinstance(carried := data.get("f"), dict):  # what a :+1: keeps as a resolved incident
        from agent.summary import Verdict
        from incidents.signature import Failure

        answer.failure = Failure.from_json({"kind": carried.get("k"), "messages": carried.get("m"), "hosts": carried.get("h"),
                                            "gpus": carried.get("g")})
        answer.verdict = Verdict(cause=answer.answer, fix_text=str(carried.get("x") or ""))
    return str(data.get("id", "")), answer
