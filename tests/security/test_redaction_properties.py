"""Properties of the redactor over arbitrary text (Hypothesis): a planted secret never survives, masking twice
is masking once, no output line is longer than the documented cap; and masking stays linear in time."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.redaction import Redactor
from common.secrets import LINE_CAP, SHAPES, clip, mask

# Text that looks like logs and configuration: separators, quotes, the characters secrets are made of.
noise = st.text(st.sampled_from(list("abcxyzABCXYZ0189_-.:=/@'\" \t\n[]`*~+eyJhfskgpAKIAtokenBearer")), max_size=400)
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


ADVERSARIAL = {
    "letters": "a", "schemes": "ab://", "url credentials": "a:a@", "jwt starts": "-eyJ", "assignments": "token=",
    "flags": "--token ", "secret words": "tokentoken_key", "authorization": "Authorization: ", "bearer": "Bearer ",
    "netrc": "password \n", "pem": "-----BEGIN PRIVATE KEY-----", "ports": " port ",
}


@pytest.mark.parametrize("unit", list(ADVERSARIAL.values()), ids=list(ADVERSARIAL))
def test_masking_is_linear_in_time(unit: str) -> None:
    """Ten times the text takes about ten times as long (a quadratic pattern would take a hundred)."""
    timings = []
    for size in (100_000, 1_000_000):
        text = _lines(unit, size)
        started = time.perf_counter()
        mask(text)
        Redactor(mode="strict").redact(text)
        timings.append(time.perf_counter() - started)
    assert timings[1] < 30, f"1 MB took {timings[1]:.1f} s"
    assert timings[1] / max(timings[0], 1e-3) < 25, timings
