"""Answers whose kind the check can confirm end with it: `confirm_with` on the kind's row of the registry's data,
read by checks.confirm, appended by the composer, kept by the brief answer."""

from __future__ import annotations

from agent.answer import Citation
from agent.brief import brief
from agent.compose import compose
from checks.confirm import confirm_with, confirmable
from runbooks.registry import kinds

LINE_EN = "confirm: `traindoc check nccl` now, and again after the fix"


def test_the_collective_and_network_kinds_are_confirmed_by_the_check_and_exist() -> None:
    table = confirmable()
    assert set(table) <= set(kinds())
    for kind in ("collective_timeout", "nccl_interface", "nccl_network", "consumer_gpu_p2p"):
        assert confirm_with(kind) == "traindoc check nccl"
    assert confirm_with("cuda_oom") is None and confirm_with(None) is None


def _answer(kind: str, lang: str = "en") -> str:
    runbook = Citation(1, "corpus/runbooks/en/x.md", "Runbook", "c1", 1.0, text="t")
    other = Citation(2, "docs/a.md", "A > B", "c2", 0.5, text="b")
    lead = "### Fixes\n\n1. Do the thing.\n\n```bash\nexport NCCL_SOCKET_IFNAME=eth0\n```\n" + "\nMore words.\n" * 30
    return compose("why does NCCL hang", [runbook, other], [], False, [], [], lead=lead, lead_kind=kind, lang=lang)


def test_an_answer_of_a_confirmable_kind_ends_with_the_check_in_its_language() -> None:
    answer = _answer("nccl_interface")
    assert answer.endswith(LINE_EN)
    assert answer.index(LINE_EN) > answer.index("See also")
    assert _answer("nccl_interface", "zh").endswith("确认：现在运行 `traindoc check nccl`，修复后再运行一次")
    assert "traindoc check" not in _answer("cuda_oom")


def test_the_brief_answer_keeps_it() -> None:
    answer = _answer("collective_timeout")
    short = brief(answer, "en", sources=["Runbook", "A"], most=20)
    assert short != answer and LINE_EN in short and "See also" not in short
