"""Secrets said in a sentence and tokens wrapped by a no-break space (issue 40, point 1): ``密码是 X``, ``我的密码 X``,
``the db password is X``, ``token 是 X`` are masked, and ``hf_Zq8vR2kL5m<NBSP>N7pX…`` is one token, masked over the
original's span; ordinary prose ("the password is wrong") and words that a no-break space separates are left alone.
The rows behind them are in ``common.secret_shapes.SHAPES``, so the per-surface tests (``test_secret_shapes.py``,
``test_secret_spellings.py``) plant their examples on every path; this file asks the phrasings themselves."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.redaction import Redactor
from common.secret_shapes import looks_like_a_value
from common.secrets import LINE_CAP, MASK, SHAPES, mask
from common.spellings import plain
from tools.redact import mask_json

NBSP, NNBSP = "\u00a0", "\u202f"
PW = "Zq8vR2kL5mN8"
HF = "hf_Zq8vR2kL5mN7pXqT1xW4yB6cD9fG3hJ0"

# (text, what must not be seen again): the audit's leaks, as they were written, and their kin
SAID = [
    (f"密码是 {PW}", PW), (f"口令为 {PW}", PW), (f"我的密码 {PW}", PW), (f"数据库密码是{PW}", PW), (f"密钥是 {PW}", PW),
    (f"令牌是 {PW}", PW), (f"token 是 {PW}", PW), (f"token为{PW}。", PW), (f"密码设置为 {PW}", PW), (f"密码是“{PW}”", PW),
    (f"密码为：{PW}", PW), ("我的银行卡密码是 482913", "482913"),
    (f"the db password is {PW}", PW), (f"password was {PW}", PW), (f"pwd is {PW}", PW), (f"token is {PW}", PW),
    (f"api key is {PW}", PW), (f"passwd = {PW}", PW), (f"Password is: {PW}", PW), ("the password is hunter2.", "hunter2"),
    (f"the admin password was changed to {PW}", PW), (f"the api key is now '{PW}-x'", f"{PW}-x"),
    ("the password was set to 'Zq8v R2'", "Zq8v R2"), ("the PIN password is 123456", "123456"),
    ("the default password is P@ssword!", "P@ssword!"), (f"access key is {PW} for the bucket", PW),
]


@pytest.mark.parametrize("text, secret", SAID, ids=[t for t, _ in SAID])
def test_a_secret_said_in_a_sentence_is_masked_on_every_path(text: str, secret: str) -> None:
    masked = mask(text)
    assert secret not in masked and MASK in masked
    assert masked.replace(MASK, secret, 1) == text  # the value, and only the value, was masked
    redactor = Redactor()
    sent = redactor.redact(text)
    assert secret not in sent and redactor.restore(sent) == text
    assert secret not in json.dumps(mask_json({"line": text}), ensure_ascii=False)


PROSE = [
    "the password is wrong", "password is required", "password is not set", "token is expired",
    "the password is in the vault", "Password is required for user trainer", "the token is still valid",
    "token is sha256-hashed", "the password is case-sensitive", "token is 32-bytes long", "the token is v1.2.3",
    "eos token is 128001", "the pad token is <|endoftext|>", "the pad token is '<|endoftext|>'", "pad_token is None",
    "if password is None: return", "PWD is /workspace", "the token is $HF_TOKEN", "the token is ~/.cache/huggingface/token",
    "the password is 'wrong'", "password is *** and token is [SECRET_1]", "the secret is to lower the learning rate",
    "密码是错误的", "密码 错误", "从调度器传入的密钥中 export WANDB_API_KEY", "令牌桶是空的", "token 是必需的",
    "passwords are rotated weekly", "tokenizer is slow", "max_new_tokens is 4096",
]


@pytest.mark.parametrize("text", PROSE)
def test_ordinary_prose_about_a_password_is_left_alone(text: str) -> None:
    assert mask(text) == text
    assert Redactor().redact(text) == text


@pytest.mark.parametrize("text", ["password is required", "password was rotated", "password is: hidden"])
def test_a_sentence_at_a_line_start_is_not_a_netrc_line(text: str) -> None:
    """``password X`` at a line start is a netrc line; ``password is X`` is a sentence, whose copula is no password."""
    assert mask(text) == text
    assert mask(f"{text.split()[0]} was {PW}\nnext") == f"{text.split()[0]} was {MASK}\nnext"


@pytest.mark.parametrize("word, digits, value", [
    ("Zq8vR2kL5mN8", False, True), ("hunter2", False, True), ("P@ssword!", False, True), ("abc123", False, True),
    ("Summer-2024", False, True), ("zq8v-r2kl", False, True),
    ("wrong", False, False), ("required", False, False), ("case-sensitive", False, False), ("sha256-hashed", False, False),
    ("32-bytes", False, False), ("v1.2.3", False, False), ("x86_64", False, False), ("ab1", False, False),
    ("128001", False, False), ("128001", True, True), ("12345", True, False),
])
def test_a_value_is_told_from_a_word(word: str, digits: bool, value: bool) -> None:
    assert looks_like_a_value(word, digits=digits) is value


def test_the_table_plants_the_phrasings_on_every_surface() -> None:
    """The per-surface tests plant every row's example: the phrasings are rows, each found by its own example."""
    examples = {s.example: s for s in SHAPES}
    for example in ("the db password is Zq8vR2kL5mN8", "数据库密码是Zq8vR2kL5mN8，请勿外传", "我的密码 Zq8vR2kL5mN8",
                    "token 是 Zq8vR2kL5mN8"):
        shape = examples[example]
        assert shape.check is not None and shape.planted not in mask(example)


# -- a no-break space inside a token ------------------------------------------------------------------------------


@pytest.mark.parametrize("space", [NBSP, NNBSP, "\u2007"])
def test_a_no_break_space_inside_a_token_is_read_as_nothing(space: str) -> None:
    wrapped = HF[:13] + space + HF[13:]
    text = f"NCCL INFO rank 3; use {wrapped} (rank 3)"
    assert plain(text).text == f"NCCL INFO rank 3; use {HF} (rank 3)"
    masked = mask(text)
    assert masked == f"NCCL INFO rank 3; use {MASK} (rank 3)"  # the original's span, the space inside it
    redactor = Redactor()
    sent = redactor.redact(text)
    assert HF[:13] not in sent and HF[14:] not in sent and redactor.restore(sent) == text


def test_several_no_break_spaces_inside_one_token_and_a_word_after_it() -> None:
    wrapped = NBSP.join([HF[:8], HF[8:20], HF[20:]])
    assert mask(f"{wrapped}{NBSP}and{NBSP}more") == f"{MASK}{NBSP}and{NBSP}more"
    assert mask(f"the{NBSP}{HF}{NBSP}token") == f"the{NBSP}{MASK}{NBSP}token"
    other = "hf_" + HF[3:][::-1]
    assert mask(f"{HF}{NBSP}{other}") == f"{MASK}{NBSP}{MASK}"  # two tokens: the second is not read into the first
    for part in (HF[:8], HF[8:20], HF[20:]):
        assert part not in mask(wrapped)


@pytest.mark.parametrize("text", [
    f"the{NBSP}password{NBSP}is{NBSP}wrong", f"10{NBSP}GB free", f"gl{NBSP}Batch", f"sk-{NBSP}learn",
    f"GPU{NBSP}0:{NBSP}NVIDIA{NBSP}H100", f"hf_hub{NBSP}download",
])
def test_a_no_break_space_between_words_stays_a_space(text: str) -> None:
    assert mask(text) == text
    assert " " in plain(text).text


@pytest.mark.parametrize("text, secret", [
    (f"the{NBSP}db{NBSP}password{NBSP}is{NBSP}{PW}", PW), (f"我的密码{NBSP}{PW}", PW), (f"token{NBSP}是{NBSP}{PW}", PW),
])
def test_a_sentence_written_with_no_break_spaces_is_still_masked(text: str, secret: str) -> None:
    assert secret not in mask(text)


# -- linear on hostile text ---------------------------------------------------------------------------------------

NEAR = {
    "copula": "password is ", "copulas": "password is is is ", "said value": "the token is now a1", "open quote": "password is 'a1 ",
    "dots": "password is a.a.a.", "zh label": "密码 ", "zh copula": "密码是", "token zh": "token 是 ", "netrc": "password is\n",
    "nbsp": f"hf_a{NBSP}", "nbsp words": f"a{NBSP}", "nbsp runs": "x" * 255 + NBSP, "nbsp token": "hf_" + "Z1" * 120 + NBSP,
    "nbsp inside": f"hf_Z{NBSP}" + f"A1{NBSP}" * 50 + "\n",
}


def _lines(unit: str, size: int) -> str:
    line = (unit * (2000 // len(unit) + 1))[:2000] + "\n"
    return (line * (size // len(line) + 1))[:size]


@pytest.mark.parametrize("unit", list(NEAR.values()), ids=list(NEAR))
def test_long_near_matches_are_read_whole_and_still_masked(unit: str) -> None:
    text = _lines(unit, 32_000) + f" {HF} \n" + _lines(unit, 32_000) + f"\nthe password is {PW}"
    out = mask(text)
    assert HF not in out and PW not in out and max(len(line) for line in out.split("\n")) <= LINE_CAP
    assert mask(out) == out


def _seconds(text: str) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        mask(text)
        best = min(best, time.perf_counter() - start)
    return best


@pytest.mark.parametrize("unit", [NEAR["copulas"], NEAR["zh label"], NEAR["nbsp words"], NEAR["nbsp inside"]],
                         ids=["copulas", "zh label", "nbsp words", "nbsp inside"])
def test_masking_time_grows_with_the_text_not_its_square(unit: str) -> None:
    """16 times the text: linear is about 16 times the time, quadratic 256; the bound leaves room for a busy machine."""
    small, large = _seconds(_lines(unit, 16_000)), _seconds(_lines(unit, 256_000))
    assert large < 80 * max(small, 1e-3)


# -- properties -------------------------------------------------------------------------------------------------

noise = st.lists(st.sampled_from([*"abcxyzABC0189_-.:=/@'\" \t\n是为密码令牌", NBSP, "password ", "token", " is ", "hf_"]),
                 max_size=80).map("".join)
phrasings = st.sampled_from(SAID)


@given(before=noise, after=noise, said=phrasings)
def test_a_said_secret_never_survives_among_noise(before: str, after: str, said: tuple[str, str]) -> None:
    text, secret = said
    assert secret not in mask(f"{before}\n{text}\n{after}")


@given(text=noise | st.text(max_size=300))
def test_masking_text_with_no_break_spaces_twice_is_masking_once(text: str) -> None:
    once = mask(text)
    assert mask(once) == once
