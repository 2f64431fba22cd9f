"""Three messages that name their kind outright (issue 36 point 2, issue 37): ms-swift's own argument parser refuses
flags it does not know with `ValueError: remaining_argv: [...]` (swift/utils/run_utils.py), the launch line's fault
(bad_arguments); transformers refuses DeepSpeed inference, an evaluation or a prediction before any training, on a
stage 1 or 2 config with `ZeRO inference only makes sense with ZeRO Stage 3` (integrations/deepspeed.py), the
config's fault (deepspeed_config), whose new fix reads the config's stage; vLLM refuses a tensor-parallel size that does
not divide the model's attention heads (vllm/config/model.py), a flag this model does not support (vllm_unsupported,
fix 9: the heads from config.json, a dividing size, pipeline parallelism for more GPUs). Each line alone picks its runbook, in both
languages; a pasted report leads with it, end to end (real index)."""

from __future__ import annotations

from typing import Any

import pytest

from runbooks.catalog import runbooks
from runbooks.choose import for_lines
from tests.clikit import ask_json, lead_kind

SWIFT = "ValueError: remaining_argv: ['--enable_new_loss', 'true']"
ZERO_INFERENCE = "ValueError: ZeRO inference only makes sense with ZeRO Stage 3 - please adjust your config"
HEADS = "ValueError: Total number of attention heads (28) must be divisible by tensor parallel size (8)."


@pytest.mark.parametrize(("line", "kind"), [(SWIFT, "bad_arguments"), (ZERO_INFERENCE, "deepspeed_config"),
                                            (HEADS, "vllm_unsupported")])
def test_the_line_alone_picks_its_runbook_in_both_languages(line: str, kind: str) -> None:
    chosen = for_lines([line])
    assert chosen is not None and chosen.kind == kind, chosen and chosen.kind
    english, chinese = runbooks()[(kind, "en")], runbooks()[(kind, "zh")]
    assert english.messages == chinese.messages and any(message in line for message in english.messages)


@pytest.mark.usefixtures("use_shared_index")
@pytest.mark.parametrize(("question", "kind", "fix_words"), [
    ("swift sft fails at once:\n" + SWIFT, "bad_arguments", "train.py"),
    ("评估时报错：\n" + ZERO_INFERENCE + "\n我用的是 ds_zero2.json", "deepspeed_config", "zero_optimization"),
    ("vllm serve fails on 8 GPUs:\n" + HEADS, "vllm_unsupported", "--pipeline-parallel-size"),
])
def test_a_pasted_report_leads_with_it(cli: Any, question: str, kind: str, fix_words: str) -> None:
    answer = ask_json(cli, question)
    assert lead_kind(answer) == kind, answer.get("lead")
    assert fix_words in answer["verdict"]["fix"], answer["verdict"]["fix"]  # the fix for that message, not another
