"""A kind's signal in words the report denies is not its failure: "to avoid OOM", "no NaN", "isn't an OOM", "没有出现
OOM" do not tell the out-of-memory or NaN runbooks from their neighbours, while the same words stated plainly still do.
Run as a user runs it too: a question about something else that mentions avoiding an OOM is not led by the OOM runbook."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runbooks.registry import denied, signalled


@pytest.mark.parametrize(("text", "kind"), [
    ("I restart the notebook between runs to avoid OOM", "cuda_oom"),
    ("there is no NaN in the loss", "nan_loss"),
    ("it is not an OOM, the job just stops", "cuda_oom"),
    ("训练时没有出现OOM，但是速度很慢", "cuda_oom"),
    ("the process was never Killed", "host_oom"),
])
def test_a_denied_signal_tells_nothing(text: str, kind: str) -> None:
    assert signalled(kind, text) is None


@pytest.mark.parametrize(("text", "kind"), [
    ("the job hits OOM at step 10", "cuda_oom"),
    ("loss becomes NaN after 200 steps", "nan_loss"),
    ("训练到一半 OOM 了", "cuda_oom"),
    ("no error message, then the rank is Killed", "host_oom"),  # a denial stops at the comma: the kill stands
    ("I do not know why the loss goes NaN", "nan_loss"),  # a denial reaches one filler word, not a clause
])
def test_the_same_signal_stated_still_tells_the_kind(text: str, kind: str) -> None:
    assert signalled(kind, text) is not None


def test_a_denial_is_read_on_the_signal_s_own_line() -> None:
    text = "no\nOOM at step 3"
    assert not denied(text, text.index("OOM"))


@pytest.mark.usefixtures("use_shared_index")
def test_a_question_that_only_avoided_an_oom_is_not_the_oom_runbook(cli: Any) -> None:
    question = "Why does my eval loss differ between runs with the same seed? I use a smaller batch to avoid OOM."
    done = cli("ask", "--json", "--no-probes", question)
    assert done.returncode == 0, done.stderr[-800:]
    assert (json.loads(done.stdout)["lead"] or {}).get("kind") != "cuda_oom"
