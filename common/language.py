"""The question's language, and traindoc's own words in it (headings, the cause line, notices, a job's verdict).

Quoted document text stays as written; only the words traindoc adds around it follow the question.
Every sentence traindoc says is a key of one phrase book, with each language beside it: the tables of
``common/data/phrases.json`` (one per language) and the files of ``common/data/phrases/`` (one per area,
``{key: {"en": ..., "zh": ...}}``). They sit below every package so that the job reader (jobs/), the
composer (agent/) and the front ends (traindoc_cli/, traindoc_web/, traindoc_slack/) share them. A key missing a
language, or kept in two places, fails when the book is read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
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
# The same after the words that introduce what the program printed ("启动报错 No available memory for the cache
# blocks", "提示：Address already in use"): the English that follows them, up to the next Chinese character, is quoted.
PASTED_AFTER_SAYING = re.compile(r"(?:(?<=报错)|(?<=报了错)|(?<=错误信息)|(?<=错误提示)|(?<=提示)|(?<=显示)|(?<=输出))"
                                 r"[:：]?\s*(?=[A-Za-z])[^\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]*")
# Identifiers, paths, versions, ALLCAPS acronyms (NCCL, CUDA) and CamelCase (RuntimeError, NaN) are
# shared by both languages: only plain words count as English.
PLAIN_WORD = re.compile(r"(?<![\w./:=-])[A-Za-z][a-z]*(?:'[a-z]+)?(?![\w/:=(-]|\.\w)")
CJK_WORD_CHARS = 1.7  # a Chinese word is about 1.7 characters
ZH_SHARE = 0.4


# A line that opens with a run of English words and goes on in Chinese ("NVRM: Xid 79 ... GPU has fallen off the bus.
# 训练中断了") quotes what a program printed, then asks in Chinese: the run is not the asker's prose.
LEADING_RUN = re.compile(r"^[^\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]{1,400}")
LEADING_RUN_WORDS = 3
# What marks the run as a program's words rather than the asker's English ("why does my job hang at 初始化"): a
# message's punctuation or its vocabulary.
PRINTED_WORDS = re.compile(r"[:=()\[\]]|(?i:\b(?:error|fail\w*|fallen|killed|exception|warn\w*|timeout|timed out|"
                           r"denied|refused|not found|no such|unable|cannot)\b)")


def _without_leading_paste(line: str) -> str:
    found = LEADING_RUN.match(line)
    if found is None or len(PLAIN_WORD.findall(run := found.group(0))) < LEADING_RUN_WORDS or not PRINTED_WORDS.search(run):
        return line
    return line[found.end():]


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
            line = _without_leading_paste(PASTED_AFTER_SAYING.sub(" ", PASTED_EXCEPTION.sub(" ", line)))
        cjk += len(CJK.findall(line))
        words += len(PLAIN_WORD.findall(line))
    chinese_words = cjk / CJK_WORD_CHARS
    if cjk < 2 or chinese_words + words == 0:
        return "en"
    return "zh" if chinese_words / (chinese_words + words) >= ZH_SHARE else "en"


PHRASES = "phrases.json"  # {lang: {key: text}}
PHRASE_BOOK = "phrases"  # files of {key: {lang: text}}


def phrase_books() -> list[tuple[str, dict[str, Any]]]:
    """(name, {key: {lang: text}}) of every file of the phrase book, ``phrases.json`` turned key-major."""
    data = resources.files("common").joinpath("data")
    by_lang: dict[str, dict[str, str]] = json.loads(data.joinpath(PHRASES).read_text(encoding="utf-8"))
    keys = dict.fromkeys(key for table in by_lang.values() for key in table)
    books = [(PHRASES, {key: {lang: table[key] for lang, table in by_lang.items() if key in table} for key in keys})]
    files = sorted((f for f in data.joinpath(PHRASE_BOOK).iterdir() if f.name.endswith(".json")), key=lambda f: f.name)
    books += [(f"{PHRASE_BOOK}/{f.name}", json.loads(f.read_text(encoding="utf-8"))) for f in files]
    return books


def merge_books(books: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[Lang, dict[str, str]]:
    """One table per language from ``books``; a key that lacks a language (or has one traindoc does not speak), or
    that two books hold, raises ValueError."""
    tables: dict[Lang, dict[str, str]] = {lang: {} for lang in LANGS}
    held: dict[str, str] = {}
    for name, book in books:
        for key, said in book.items():
            if key in held:
                raise ValueError(f"common/data/{name}: phrase {key!r} is also in common/data/{held[key]}")
            held[key] = name
            if not isinstance(said, Mapping) or sorted(said) != sorted(LANGS) or \
                    not all(isinstance(text, str) for text in said.values()):
                raise ValueError(f"common/data/{name}: phrase {key!r} needs a text in each of {', '.join(LANGS)}: {said!r}")
            for lang in LANGS:
                tables[lang][key] = said[lang]
    return tables


@cache
def _table() -> dict[Lang, dict[str, str]]:
    return merge_books(phrase_books())


def template(key: str, lang: Lang = "en") -> str:
    """The phrase ``key`` in ``lang`` with its ``{name}`` fields unfilled."""
    return _table()[lang if lang in LANGS else "en"][key]


def say(key: str, lang: Lang = "en", **values: Any) -> str:
    """The phrase ``key`` in ``lang``, with ``{name}`` fields filled from ``values``."""
    phrase = template(key, lang)
    return phrase.format(**values) if values else phrase
