"""The question's language, and traindoc's own words in it (headings, the cause line, notices).

Quoted document text stays as written; only the words traindoc adds around it follow the question.
The phrases live in ``common/data/phrases.json`` (one table per language); they sit below every
package so that the job renderer (jobs/) and the composer (agent/) share them.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any, Literal

Lang = Literal["en", "zh"]
LANGS: tuple[Lang, ...] = ("en", "zh")
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
# A line without CJK that reads like pasted output (a traceback, a log line) says nothing about the
# language the user writes in.
PASTED = re.compile(r"Error\b|Exception\b|Traceback|^\s*File \"|\bWARN|\bINFO\b|^\s*at |\[rank\d|^\s*[\[(]?\d{2,4}[-:/]")
CODE_SPAN = re.compile(r"`[^`]*`")
# An exception pasted into a sentence ("微调后报错：RuntimeError: element 0 of tensors ..."): from the exception's
# name on to the next Chinese character is the program's words, not the user's (read from a literal: linear).
PASTED_EXCEPTION = re.compile(r"(?:Error|Exception)\s{0,4}:[^\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]*")
# Identifiers, paths, versions, ALLCAPS acronyms (NCCL, CUDA) and CamelCase (RuntimeError, NaN) are
# shared by both languages: only plain words count as English.
PLAIN_WORD = re.compile(r"(?<![\w./:=-])[A-Za-z][a-z]*(?:'[a-z]+)?(?![\w/:=(-]|\.\w)")
CJK_WORD_CHARS = 1.7  # a Chinese word is about 1.7 characters
ZH_SHARE = 0.4


def language_of(text: str) -> Lang:
    """``zh`` when Chinese words make up at least 40% of the question's own prose, else ``en``. The prose is the
    lines that hold Chinese where any do (the rest is pasted), else every line that does not read as pasted output."""
    cjk = 0
    words = 0
    lines = [(line, CJK.search(line) is not None) for line in text.splitlines()]
    # Where some lines hold Chinese, the user wrote those: a line with none beside them is pasted output (a log
    # line, a pip message, an error's continuation), whatever its words.
    chinese_lines = any(has_cjk for _, has_cjk in lines)
    for line, has_cjk in lines:
        if not has_cjk and (chinese_lines or PASTED.search(line)):
            continue
        line = CODE_SPAN.sub(" ", line)
        if has_cjk:
            line = PASTED_EXCEPTION.sub(" ", line)
        cjk += len(CJK.findall(line))
        words += len(PLAIN_WORD.findall(line))
    chinese_words = cjk / CJK_WORD_CHARS
    if cjk < 2 or chinese_words + words == 0:
        return "en"
    return "zh" if chinese_words / (chinese_words + words) >= ZH_SHARE else "en"


@cache
def _table() -> dict[str, dict[str, str]]:
    data: dict[str, dict[str, str]] = json.loads(
        resources.files("common").joinpath("data/phrases.json").read_text(encoding="utf-8"))
    missing = {lang: sorted(set(data["en"]) - set(data[lang])) for lang in LANGS}
    if any(missing.values()):
        raise ValueError(f"common/data/phrases.json: phrases missing: {missing}")
    return data


def say(key: str, lang: Lang = "en", **values: Any) -> str:
    """The phrase ``key`` in ``lang``, with ``{name}`` fields filled from ``values``."""
    phrase = _table()[lang if lang in LANGS else "en"][key]
    return phrase.format(**values) if values else phrase
