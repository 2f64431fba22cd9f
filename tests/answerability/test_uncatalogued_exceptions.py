"""A pasted exception no catalogue knows (a dataset's KeyError, a library's own assertion) is answered only by a
section that quotes it; a known kind (CUDA OOM, NCCL, a missing kernel image) is still answered by its words."""

from __future__ import annotations

import json

import pytest

from agent.core import Question
from agent.uncatalogued import uncatalogued_exception


@pytest.mark.parametrize("text", [
    "训练时报错 KeyError: 'response_text'，是不是数据集的字段不对？",
    "AssertionError: hidden size must be divisible by the number of attention heads\nhow do I fix this?",
    "Traceback (most recent call last):\n  File \"prep.py\", line 3, in <module>\nValueError: unknown label 'spam' in column y",
    "mylib.errors.ConfigurationError: field 'warmup' is not allowed here",
])
def test_an_exception_no_signature_or_family_names_is_uncatalogued(text: str) -> None:
    assert uncatalogued_exception(text)
    assert Question(text=text).needs_a_quote()


@pytest.mark.parametrize("text", [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "RuntimeError: CUDA error: no kernel image is available for execution on the device",
    "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error",
    "my NCCL job hangs after the first step, what should I check?",  # prose: no exception at all
    "the loss is Error-free but the accuracy is flat",  # no exception name followed by a colon
])
def test_known_kinds_and_prose_are_not(text: str) -> None:
    assert not uncatalogued_exception(text)


def test_a_long_identifier_is_read_in_linear_steps() -> None:
    hostile = ("a" * 5000 + ".") * 40 + "Error"  # no colon: not an exception line, read once
    assert not uncatalogued_exception(hostile)


@pytest.mark.slow
def test_a_dataset_key_error_gets_no_section_that_does_not_quote_it(use_shared_index, cli) -> None:
    result = cli("ask", "--json", "--no-probes",
                 "训练的时候报错 KeyError: 'conversation_turns'，数据集是我自己转换的，应该怎么改？")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    seeds = [c for c in answer["citations"] if "runbooks" not in c["source"]]
    assert seeds == [], [c["section"] for c in seeds]


@pytest.mark.slow
def test_a_known_kind_pasted_alone_still_gets_its_section(use_shared_index, cli) -> None:
    result = cli("ask", "--json", "--no-probes", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["no_match"] is False and answer["citations"]
