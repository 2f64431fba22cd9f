"""A tokenizer or dataset that does not fit fine-tuning is its own failure (runbook chat_template_format): each line
Transformers and TRL's SFTTrainer print for it (no chat template, no pad token, a template refusing the roles or
without {% generation %} markers, ragged labels, dataset columns TRL does not know) picks the runbook; a PEFT
target-module error, a CUDA OOM or an argparse error do not. The Transformers messages are checked against the
installed library on a tiny local tokenizer (no download)."""

from __future__ import annotations

from typing import Any

import pytest
from runbook_messages import assert_a_line_per_message, assert_picks

from runbooks.catalog import runbooks
from runbooks.choose import for_lines

KIND = "chat_template_format"
SITE = "/opt/venv/lib/python3.11/site-packages"

# One real-shaped line per message in the runbook's front matter (the same order), as Transformers/TRL print it.
LINES = [
    "ValueError: Cannot use chat template functions because tokenizer.chat_template is not set and no template "
    "argument was passed! For information about writing templates and setting the tokenizer.chat_template attribute, "
    "please see the documentation at https://huggingface.co/docs/transformers/main/en/chat_templating",
    "[rank0]: ValueError: Asking to pad but the tokenizer does not have a padding token. Please select a token to use "
    "as `pad_token` `(tokenizer.pad_token = tokenizer.eos_token e.g.)` or add a new pad token via "
    "`tokenizer.add_special_tokens({'pad_token': '[PAD]'})`.",
    "RuntimeError: You're using `assistant_only_loss=True`, but at least one example has no assistant tokens. This "
    "usually means the tokenizer's chat template doesn't generate assistant masks — it may be missing the "
    "`{% generation %}` keyword.",
    "ValueError: The chat template is not training-compatible (missing prefix-preservation or `{% generation %}` "
    "markers) and patching is not supported for this template. Please manually modify the chat template for training.",
    "ValueError: You set `assistant_only_loss=True`, but the dataset is not conversational. This option is only "
    "supported for conversational datasets.",
    "[transformers] return_assistant_tokens_mask==True but chat template does not contain `{% generation %}` keyword.",
    "jinja2.exceptions.TemplateError: Conversation roles must alternate user/assistant/user/assistant/...",
    "ValueError: Unable to create tensor, you should probably activate truncation and/or padding with 'padding=True' "
    "'truncation=True' to have batched tensors with the same length. Perhaps your features (`labels` in this case) "
    "have excessive nesting (inputs type `list` where type `int` is expected).",
    "KeyError: \"Unexpected input keys in examples: ['question', 'answer'].\"",
    "KeyError: 'text'",
    "Using pad_token, but it is not set yet.",
    "TypeError: argument 'tokens': 'NoneType' object cannot be interpreted as an integer",
]

# The older wording (Transformers 4.4x) shares the first message.
OLD_NO_TEMPLATE = ("ValueError: Cannot use apply_chat_template() because tokenizer.chat_template is not set and no "
                   "template argument was passed! For information about writing templates and setting the "
                   "tokenizer.chat_template attribute, please see the documentation at "
                   "https://huggingface.co/docs/transformers/main/en/chat_templating")

SFT_TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/work/sft.py", line 41, in <module>',
    "    trainer = SFTTrainer(model=model, args=args, train_dataset=train_dataset, processing_class=tokenizer)",
    f'  File "{SITE}/datasets/arrow_dataset.py", line 3377, in _map_single',
    "    example = apply_function_on_filtered_inputs(example, i, offset=offset)",
    f'  File "{SITE}/trl/trainer/sft_trainer.py", line 1509, in tokenize_fn',
    "    processed = _tokenize(",
    f'  File "{SITE}/transformers/tokenization_utils_base.py", line 3385, in get_chat_template',
    "    raise ValueError(",
    LINES[0],
]

UNRELATED = [
    "ValueError: Target modules {'q_proj', 'v_proj'} not found in the base model. Please check the target modules "
    "and try again.",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
    "79.10 GiB of which 1.19 GiB is free. Including non-PyTorch memory, this process has 77.90 GiB memory in use.",
    "train.py: error: unrecognized arguments: --dataset_text_field text",
]


def test_every_message_has_a_line_here_and_both_languages_list_the_same_ones() -> None:
    assert_a_line_per_message(KIND, LINES)


@pytest.mark.parametrize("line", [*LINES, OLD_NO_TEMPLATE])
def test_each_line_transformers_and_trl_print_picks_the_runbook(line: str) -> None:
    assert_picks(KIND, [line])


def test_a_whole_sft_traceback_ending_in_the_message_picks_it() -> None:
    assert_picks(KIND, SFT_TRACEBACK)


def test_a_peft_target_module_error_picks_its_own_runbook() -> None:
    chosen = for_lines([UNRELATED[0]])
    assert chosen is not None and chosen.kind == "lora_peft_misuse"


@pytest.mark.parametrize("line", UNRELATED)
def test_an_unrelated_line_does_not_pick_it(line: str) -> None:
    chosen = for_lines([line])
    assert chosen is None or chosen.kind != KIND, (line, chosen.kind)


# The Transformers messages, raised by the installed library on a tokenizer built in memory.

def _message(index: int) -> str:
    return runbooks()[(KIND, "en")].messages[index]


@pytest.fixture
def tokenizer() -> Any:  # a PreTrainedTokenizerFast; transformers is optional here
    pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = Tokenizer(models.WordLevel({"[UNK]": 0, "</s>": 1, "hello": 2, "world": 3}, unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=words, eos_token="</s>", unk_token="[UNK]")


CHAT = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "world"}]
STRICT = ("{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
          "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
          "{{ message['content'] }}{% endfor %}")


def test_a_tokenizer_without_a_template_raises_the_first_message(tokenizer: Any) -> None:
    assert tokenizer.chat_template is None  # what check 1 prints as False
    with pytest.raises(ValueError, match="Cannot use chat template functions") as raised:
        tokenizer.apply_chat_template(CHAT)
    assert _message(0) in str(raised.value)


def test_padding_without_a_pad_token_raises_and_eos_as_pad_fixes_it(tokenizer: Any) -> None:
    with pytest.raises(ValueError) as raised:
        tokenizer(["hello", "hello world"], padding=True)
    assert _message(1) in str(raised.value)
    tokenizer.pad_token = tokenizer.eos_token  # fix 3
    assert tokenizer(["hello", "hello world"], padding=True)["input_ids"] == [[2, 1], [2, 3]]


def test_a_template_without_generation_markers_warns_and_masks_no_assistant_token(
    tokenizer: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from transformers.utils import logging

    tokenizer.chat_template = "{% for message in messages %}{{ message['content'] }} {% endfor %}"
    logging.warning_once.cache_clear()  # a warning transformers prints once per process: another test may have printed it
    verbosity = logging.get_verbosity()  # and another library may have quietened transformers' logger
    logging.set_verbosity_warning()
    logging.enable_propagation()
    try:
        with caplog.at_level("WARNING"):
            out = tokenizer.apply_chat_template(CHAT, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    finally:
        logging.disable_propagation()
        logging.set_verbosity(verbosity)
    assert sum(out["assistant_masks"]) == 0  # what TRL's RuntimeError reports
    assert _message(5) in caplog.text


def test_a_template_that_refuses_a_system_turn_raises_the_roles_message(tokenizer: Any) -> None:
    from jinja2.exceptions import TemplateError

    tokenizer.chat_template = STRICT
    with pytest.raises(TemplateError) as raised:
        tokenizer.apply_chat_template([{"role": "system", "content": "hello"}, *CHAT], tokenize=False)
    assert _message(6) in str(raised.value)
    assert tokenizer.apply_chat_template(CHAT, tokenize=False) == "helloworld"  # fix 5: no system turn


def test_ragged_labels_fail_with_padding_collator_and_pass_with_seq2seq(tokenizer: Any) -> None:
    from transformers import DataCollatorForSeq2Seq, DataCollatorWithPadding

    tokenizer.pad_token = tokenizer.eos_token
    rows = [{"input_ids": [2], "labels": [2]}, {"input_ids": [2, 3], "labels": [2, 3]}]
    with pytest.raises(ValueError) as raised:
        DataCollatorWithPadding(tokenizer)([dict(r) for r in rows])
    assert _message(7) in str(raised.value)
    batch = DataCollatorForSeq2Seq(tokenizer, padding=True, label_pad_token_id=-100)([dict(r) for r in rows])
    assert batch["labels"].tolist() == [[2, -100], [2, 3]]  # fix 4


def test_eos_as_pad_with_the_language_modeling_collator_drops_the_eos_label(tokenizer: Any) -> None:
    from transformers import DataCollatorForLanguageModeling

    tokenizer.pad_token = tokenizer.eos_token
    batch = DataCollatorForLanguageModeling(tokenizer, mlm=False)([{"input_ids": [2, 3, 1]}])
    assert batch["labels"].tolist() == [[2, 3, -100]]  # the runbook's what-not-to-do: EOS is never learned
