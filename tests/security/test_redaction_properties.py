"""Properties of the redactor over arbitrary text (Hypothesis): a planted secret never survives, masking twice
is masking once, no output line is longer than the documented cap; and long runs of near-matches of every
shape are read whole and still masked (their time, 10 KB against 1 MB, is ``benchmarks/bench_redact.py``'s)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.redaction import Redactor
from common.secrets import LINE_CAP, SHAPES, clip, mask

# Text that looks like logs and configuration: separators, quotes, the characters secrets are made of.
noise = st.text(st.sampled_from(list("abcxyzABCXYZ0189_-.:=/@'\" \t\n[]`*~+eyJhfskgpAKIAtokenBearerQ%;|")), max_size=400)
shapes = st.sampled_from(SHAPES)


@given(before=noise, after=noise, shape=shapes)
def test_a_planted_secret_never_survives(before: str, after: str, shape) -> None:  # type: ignore[no-untyped-def]
    text = f"{before} {shape.example} {after}"
    assert shape.planted not in mask(text)
    assert shape.planted not in Redactor().redact(text)


@given(text=st.text(max_size=600) | noise)
def test_masking_twice_is_masking_once(text: str) -> None:
    once = mask(text)
    assert mask(once) == once
    redactor = Redactor()
    sent = redactor.redact(text)
    assert redactor.redact(sent) == sent


@given(before=noise, shape=shapes, repeat=st.integers(1, 400))
def test_no_output_line_exceeds_the_cap(before: str, shape, repeat: int) -> None:  # type: ignore[no-untyped-def]
    text = (before + " " + shape.example + " ") * repeat
    for out in (mask(text), Redactor().redact(text), Redactor(mode="strict").redact(text)):
        assert max(len(line) for line in out.split("\n")) <= LINE_CAP


def test_a_cut_says_how_much_was_cut() -> None:
    value = "a" * 100 * 1024
    assert clip(value).endswith(" [... 98 KB cut]") and LINE_CAP - 10 <= len(clip(value)) <= LINE_CAP
    assert mask(f"NCCL_SOCKET_IFNAME={value}").endswith("KB cut]")


def _lines(unit: str, size: int) -> str:
    line = (unit * (2000 // len(unit) + 1))[:2000] + "\n"
    return (line * (size // len(line) + 1))[:size]


# Near-matches of every way a shape is found, repeated: text that makes a backtracking engine rescan. How long
# they take (10 KB against 1 MB, as a ratio) is measured by benchmarks/bench_redact.py, not here.
ADVERSARIAL = {
    "letters": "a", "schemes": "ab://", "url credentials": "a:a@", "empty user": "://:", "jwt starts": "-eyJ",
    "assignments": "token=", "flags": "--token ", "secret words": "tokentoken_key", "authorization": "Authorization: ",
    "bearer": "Bearer ", "netrc": "password \n", "netrc one line": "machine a login ", "pem": "-----BEGIN PRIVATE KEY-----",
    "pem body": "MII", "ports": " port ", "curl": "curl -u a:", "sshpass": "sshpass -p ", "docker login": "docker login -p",
    "cookie": "Cookie: ", "signature": "X-Amz-Signature=", "open quotes": 'password="', "single quotes": "pass='a ",
    "hosts": "a.", "ipv6": "a:", "hex colons": "ab::", "two-part suffix": "x.co.", "ec2 names": "ip-1-", "digits": "1.",
    "azure": "abc1Q~", "mailchimp": "0123456789abcdef-us1", "discord": "M", "pwd": "_pwd=", "json key": '"key": "',
    "base64 lines": "MII" + "A" * 61 + "\n",
}
PLANTED = "hf_" + "Zq8vR2kL5mN7pT1xW4yB6cD9fG3hJ0sA2e"


@pytest.mark.parametrize("unit", list(ADVERSARIAL.values()), ids=list(ADVERSARIAL))
def test_long_near_matches_are_read_whole_and_still_masked(unit: str) -> None:
    """64 KB of near-matches with a real token inside and after them: every line comes out within the cap, the
    token is masked wherever it sits, and masking the result again changes nothing."""
    text = _lines(unit, 32_000) + f" {PLANTED} \n" + _lines(unit, 32_000) + f"\nloss nan {PLANTED}"
    for out in (mask(text), Redactor().redact(text), Redactor(mode="strict").redact(text)):
        assert PLANTED not in out
        assert max(len(line) for line in out.split("\n")) <= LINE_CAP
    assert mask(mask(text)) == mask(text)
