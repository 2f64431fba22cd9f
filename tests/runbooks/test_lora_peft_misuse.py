"""LoRA/PEFT set up wrongly is its own failure (runbook lora_peft_misuse): each line PEFT, Transformers and TRL print
for it (target modules that match nothing or cannot be wrapped, a quantized model without adapters, an adapter
stacked twice, a path that holds no adapter, nothing trainable) picks the runbook; the backward error of LoRA with
reentrant checkpointing, a state_dict size mismatch and a missing chat template pick their own. PEFT is not installed
here: its messages are quoted from its source (0.20.0 and main); the runbook's module listing (check 2) is run on a
tiny Llama built from a config."""

from __future__ import annotations

import pytest
from runbook_messages import assert_a_line_per_message, assert_picks

from runbooks.choose import for_lines

KIND = "lora_peft_misuse"
SITE = "/opt/venv/lib/python3.11/site-packages"

# One real-shaped line per message in the runbook's front matter (the same order), as the libraries print it.
LINES = [
    "ValueError: Target modules {'query', 'value'} not found in the base model. Please check the target modules and "
    "try again.",
    "ValueError: No modules were targeted for adaptation. This might be caused by a combination of mismatched target "
    "modules and excluded modules. Please check your `target_modules` and `exclude_modules` configuration.",
    "ValueError: Target module LlamaRMSNorm((4096,), eps=1e-05) is not supported. Currently, only the following "
    "modules are supported: `torch.nn.Linear`, `torch.nn.Embedding`, `torch.nn.Conv1d`, `torch.nn.Conv2d`, "
    "`torch.nn.Conv3d`, `transformers.pytorch_utils.Conv1D`, `torch.nn.MultiheadAttention.`.",
    "ValueError: Please specify `target_modules` or `target_parameters`in `peft_config`",
    "ValueError: You cannot perform fine-tuning on purely quantized models. Please attach trainable adapters on top "
    "of the quantized model to correctly perform fine-tuning. Please see: https://huggingface.co/docs/transformers/peft "
    "for more details",
    "ValueError: You passed a `PeftModel` instance together with a `peft_config` to the trainer. Please first merge "
    "and unload the existing adapter, save the resulting base model, and then pass that base model along with the new "
    "`peft_config` to the trainer.",
    f"{SITE}/peft/mapping_func.py:108: UserWarning: You are trying to modify a model with PEFT for a second time. If "
    "you want to reload the model with a different config, make sure to call `.unload()` before.",
    f"{SITE}/peft/tuners/tuners_utils.py:320: UserWarning: Already found a `peft_config` attribute in the model. This "
    "will lead to having multiple adapters in the model. Make sure to know what you are doing!",
    f"{SITE}/peft/mapping_func.py:124: UserWarning: The PEFT config's `base_model_name_or_path` was renamed from "
    "'meta-llama/Llama-3.1-8B' to 'meta-llama/Llama-3.1-8B-Instruct'. Please ensure that the correct base model is "
    "loaded when loading this checkpoint.",
    "ValueError: Can't find 'adapter_config.json' at './llama-merged'",
    "ValueError: adapter model file not found in ./llama-merged. Make sure you are passing the correct path to the "
    "adapter model.",
    "trainable params: 0 || all params: 1,235,814,400 || trainable%: 0.0000",
]

# PEFT main (after 0.20.0) raises its own ValueError subclass with the same text.
NO_MATCH_ON_MAIN = ("peft.utils.error.NoMatchingPeftModuleError: Target modules {'q_proj', 'v_proj'} not found in the "
                    "base model. Please check the target modules and try again.")
HEALTHY_COUNT = "trainable params: 3,407,872 || all params: 8,033,669,120 || trainable%: 0.0424"

GET_PEFT_MODEL_TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/work/train_lora.py", line 52, in <module>',
    "    model = get_peft_model(model, lora_config)",
    f'  File "{SITE}/peft/mapping_func.py", line 125, in get_peft_model',
    "    return MODEL_TYPE_TO_PEFT_MODEL_MAPPING[peft_config.task_type](",
    f'  File "{SITE}/peft/tuners/tuners_utils.py", line 512, in inject_adapter',
    "    raise ValueError(",
    LINES[0],
]

NEIGHBOURS = {
    "no_grad_fn": "RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn",
    "checkpoint_mismatch": "RuntimeError: Error(s) in loading state_dict for PeftModelForCausalLM:\tsize mismatch for "
                           "base_model.model.model.embed_tokens.weight: copying a param with shape torch.Size([32002, "
                           "4096]) from checkpoint, the shape in current model is torch.Size([32000, 4096]).",
    "chat_template_format": "ValueError: Cannot use chat template functions because tokenizer.chat_template is not "
                            "set and no template argument was passed!",
}


def test_every_message_has_a_line_here_and_both_languages_list_the_same_ones() -> None:
    assert_a_line_per_message(KIND, LINES)


@pytest.mark.parametrize("line", [*LINES, NO_MATCH_ON_MAIN])
def test_each_line_the_libraries_print_picks_the_runbook(line: str) -> None:
    assert_picks(KIND, [line])


def test_a_whole_get_peft_model_traceback_picks_it() -> None:
    assert_picks(KIND, GET_PEFT_MODEL_TRACEBACK)


def test_a_healthy_trainable_count_picks_nothing() -> None:
    chosen = for_lines([HEALTHY_COUNT])
    assert chosen is None or chosen.kind != KIND


@pytest.mark.parametrize("kind", sorted(NEIGHBOURS))
def test_a_neighbouring_failure_picks_its_own_runbook(kind: str) -> None:
    chosen = for_lines([NEIGHBOURS[kind]])
    assert chosen is not None and chosen.kind == kind, (kind, chosen and chosen.kind)


def test_check_2_lists_the_names_lora_can_target_and_not_the_ones_from_another_architecture() -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                                      num_key_value_heads=2, vocab_size=64)
    base_model = transformers.LlamaForCausalLM(config)
    leaves = {(n.rsplit(".", 1)[-1], type(m).__name__) for n, m in base_model.named_modules() if not list(m.children())}
    names = {name for name, _ in leaves}
    assert {("q_proj", "Linear"), ("v_proj", "Linear"), ("embed_tokens", "Embedding")} <= leaves
    assert ("norm", "LlamaRMSNorm") in leaves  # a leaf, but not a type LoRA wraps: the "is not supported" error
    assert not {"query", "value", "c_attn"} & names  # BERT's and GPT-2's names: "not found in the base model"


def test_a_model_not_stopping_after_lora_is_this_kind_s_signal() -> None:
    from runbooks.registry import signalled

    assert signalled("lora_peft_misuse", "Qwen3 not stopping generation after lora finetuning")
    assert signalled("lora_peft_misuse", "after LoRA the generation is not stopping at the end of the answer")
    assert signalled("lora_peft_misuse", "the loss is not stopping at zero") is None
