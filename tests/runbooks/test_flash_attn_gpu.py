"""FlashAttention-2 refusing a pre-Ampere GPU is its own failure (runbook flash_attn_gpu), not an install or import
problem: the runbook leads in the asker's language and the documents' FlashAttention install notes do not follow;
an extension that fails to load is still the install family."""

from __future__ import annotations

import json

import pytest
from clikit import CliRunner, documents, runbook_of

from corpus import families

pytestmark = pytest.mark.usefixtures("use_shared_index")
REFUSED = "RuntimeError: FlashAttention only supports Ampere GPUs or newer."


def _ask(cli: CliRunner, question: str) -> dict:  # type: ignore[type-arg]
    result = cli("ask", "--json", "--no-probes", question)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize(("question", "lang"), [
    (f"fine-tuning on a Tesla T4 fails at the first step:\n{REFUSED}", "en"),
    (f"在 V100 上微调，第一步就报错：\n{REFUSED}", "zh"),
])
def test_a_pre_ampere_gpu_refused_by_flash_attention_gets_its_runbook(cli: CliRunner, question: str, lang: str) -> None:
    answer = _ask(cli, question)
    assert runbook_of(answer["citations"]) == "flash_attn_gpu", answer["citations"][:2]
    assert f"/runbooks/{lang}/" in answer["citations"][0]["source"]
    assert 'attn_implementation="sdpa"' in answer["answer"]
    # the seed's FlashAttention notes are about installing it: not an answer to a GPU it refuses
    assert not any("FlashAttention" in c["section"] for c in documents(answer["citations"])), answer["citations"]


def test_the_refusal_is_not_the_install_family_and_a_missing_module_still_is() -> None:
    named = lambda line: {f.name for f in families.detect(line)}  # noqa: E731
    assert "FlashAttention install or import" not in named(REFUSED)
    assert "FlashAttention install or import" in named("ImportError: flash_attn_2_cuda.so: undefined symbol: _ZN3c104cuda9SetDeviceEi")


@pytest.mark.parametrize("check", ["is_sm8x || is_sm75", "is_sm90 || is_sm8x || is_sm75"])
def test_flash_attention_1s_check_without_a_message_gets_the_same_runbook(cli: CliRunner, check: str) -> None:
    """flash-attn 1.x (Turing and newer) refuses a V100 with a bare TORCH_CHECK: the same failure, the same fixes."""
    answer = _ask(cli, "V100 finetune error\nflash_attn/flash_attn_interface.py:21 in _flash_attn_forward\n"
                       f"RuntimeError: Expected {check} to be true, but got false.")
    assert runbook_of(answer["citations"]) == "flash_attn_gpu", answer["citations"][:2]
    assert 'attn_implementation="sdpa"' in answer["answer"]
