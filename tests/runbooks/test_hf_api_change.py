"""A script written for another release of transformers, TRL or datasets is its own failure (runbook hf_api_change):
each line shape those libraries print for a renamed or removed argument, a dataset loading script or a model's custom
code picks the runbook alone; the same old option on the command line is still the bad-arguments runbook, and a Hub
that cannot be reached is the hub-access one. Where transformers is installed, its real errors are checked against
the messages: a renamed TrainingArguments field, Trainer's tokenizer=, custom code, an unknown model type."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest
from runbook_messages import assert_a_line_per_message, assert_picks

from runbooks.catalog import runbooks
from runbooks.choose import for_lines

KIND = "hf_api_change"

# One real-shaped line per message in the runbook's front matter (the same order).
LINES = [
    "RuntimeError: Dataset scripts are no longer supported, but found squad_v2.py",
    "`trust_remote_code` is not supported anymore.",
    "ValueError: The repository acme/custom-lm contains custom code which must be executed to correctly load the "
    "model. You can inspect the repository content at https://hf.co/acme/custom-lm .",
    "ValueError: Loading acme/custom-lm requires you to execute the configuration file in that repo on your local "
    "machine. Make sure you have read the code there to avoid malicious use, then set the option "
    "`trust_remote_code=True` to remove this error.",
    "ValueError: The checkpoint you are trying to load has model type `qwen9` but Transformers does not recognize this "
    "architecture. This could be because of an issue with the checkpoint, or because your version of Transformers is "
    "out of date.",
    "TypeError: TrainingArguments.__init__() got an unexpected keyword argument 'no_cuda'",
    "TypeError: SFTConfig.__init__() got an unexpected keyword argument 'max_seq_length'",
    "TypeError: SFTTrainer.__init__() got an unexpected keyword argument 'dataset_text_field'",
    # Python 3.9 and older print __init__() without the class name
    "TypeError: __init__() got an unexpected keyword argument 'evaluation_strategy'",
    "TypeError: __init__() got an unexpected keyword argument 'dataset_text_field'",
    "TypeError: __init__() got an unexpected keyword argument 'max_seq_length'",
    "TypeError: __init__() got an unexpected keyword argument 'tokenizer'",
    "ValueError: Tokenizer class AcmeTokenizer does not exist or is not currently imported.",
]

TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/work/train.py", line 41, in <module>',
    "    args = TrainingArguments(output_dir=out, evaluation_strategy=\"steps\", eval_steps=500)",
    "TypeError: TrainingArguments.__init__() got an unexpected keyword argument 'evaluation_strategy'",
]

# The old option given on the command line: HfArgumentParser refuses it (bad_arguments).
FROM_THE_COMMAND_LINE = ("ValueError: Some specified arguments are not used by the HfArgumentParser: "
                         "['--evaluation_strategy', 'steps']")
UNRELATED = [
    FROM_THE_COMMAND_LINE,
    "OSError: We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in the cached "
    "files.",
    "RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn",
]


def _message(i: int) -> str:
    return runbooks()[(KIND, "en")].messages[i]


def test_every_message_has_a_line_here_and_both_languages_list_the_same_ones() -> None:
    assert_a_line_per_message(KIND, LINES)


@pytest.mark.parametrize("line", LINES)
def test_each_line_the_libraries_print_picks_the_runbook(line: str) -> None:
    assert_picks(KIND, [line])


def test_a_whole_traceback_ending_in_the_type_error_picks_it() -> None:
    assert_picks(KIND, TRACEBACK)


def test_the_old_option_on_the_command_line_is_still_the_bad_arguments_runbook() -> None:
    chosen = for_lines([FROM_THE_COMMAND_LINE])
    assert chosen is not None and chosen.kind == "bad_arguments"


@pytest.mark.parametrize("line", UNRELATED)
def test_an_unrelated_line_does_not_pick_it(line: str) -> None:
    chosen = for_lines([line])
    assert chosen is None or chosen.kind != KIND, (line, chosen.kind)


def test_transformers_refuses_the_old_names_with_the_messages_quoted() -> None:
    transformers = pytest.importorskip("transformers")
    if int(transformers.__version__.split(".")[0]) < 5:
        pytest.skip("transformers 4.x still accepts Trainer(tokenizer=)")
    with pytest.raises(TypeError) as raised:
        transformers.TrainingArguments(output_dir="unused", evaluation_strategy="steps")
    assert _message(5) in str(raised.value) and _message(8) in str(raised.value)
    with pytest.raises(TypeError) as raised:
        transformers.Trainer(model=None, tokenizer=None)
    assert _message(7) in str(raised.value) and _message(11) in str(raised.value)
    # the runbook's check 2: the new names are the ones the installed classes take
    assert "eval_strategy" in inspect.signature(transformers.TrainingArguments).parameters
    assert "processing_class" in inspect.signature(transformers.Trainer).parameters


def test_custom_code_without_trust_remote_code_is_refused_with_the_message_quoted() -> None:
    dynamic = pytest.importorskip("transformers.dynamic_module_utils")
    with pytest.raises(ValueError, match=re.escape(_message(2))):
        dynamic.resolve_trust_remote_code(False, "acme/custom-lm", has_local_code=False, has_remote_code=True)


def test_a_model_type_newer_than_transformers_is_refused_with_the_message_quoted(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "not_a_model_type_yet"}), encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(_message(4))):
        transformers.AutoConfig.from_pretrained(str(tmp_path))
