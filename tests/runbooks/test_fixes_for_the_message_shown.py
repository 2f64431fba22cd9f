"""A runbook's fixes follow the message the report shows (issue 36 point 3): a fix written for another message of the
same runbook leaves even where no fix quotes the shown one, and a fix the asker already applied goes last. vLLM's
KV-cache runbook has both directions: more memory for the KV-cache messages, less for the start-up check."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runbooks.catalog import runbooks
from runbooks.render import for_this_message

KV = "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."
STARTUP = ("ValueError: Free memory on device (38.2/79.11 GiB) on startup is less than desired GPU memory utilization "
           "(0.9, 71.2 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.")


def _texts(line: str) -> list[str]:
    book = runbooks()[("vllm_kv_cache", "en")]
    return [item.text for item in for_this_message(book.items["fixes"], book.messages, [line])]


def test_the_start_up_fix_leaves_a_kv_cache_report_and_leads_a_start_up_one() -> None:
    kv = _texts(KV)
    assert not any("start-up message" in text for text in kv)
    assert "larger share" in kv[0]
    assert "start-up message" in _texts(STARTUP)[0]
    assert len(_texts("vLLM engine fails")) == len(runbooks()[("vllm_kv_cache", "en")].items["fixes"])  # none shown


@pytest.mark.usefixtures("use_shared_index")
def test_an_asker_already_at_095_gets_the_next_fix_and_never_a_lower_fraction(cli: Any) -> None:
    done = cli("ask", "--json", "--no-probes", "vllm serve with --gpu-memory-utilization 0.95 still fails:\n" + KV)
    assert done.returncode == 0, done.stderr[-600:]
    answer = json.loads(done.stdout)
    assert "gpu-memory-utilization" not in answer["verdict"]["fix"] and "gpu_memory_utilization=0.5" not in answer["answer"]
    assert "0.95" in answer["answer"]  # the stated value is quoted back


def test_a_note_written_as_a_quote_is_quoted_once() -> None:
    from common.language import say
    from runbooks.render import runbook_markdown

    text = runbook_markdown(runbooks()[("collective_timeout", "en")], 1, "en", notes=[say("timeout_left_out", "en")])
    assert "> A longer timeout is left out" in text and "> >" not in text


def _first(kind: str, line: str) -> str:
    book = runbooks()[(kind, "en")]
    return for_this_message(book.items["fixes"], book.messages, [line])[0].text


def test_a_shape_mismatch_gets_the_config_fix_first_and_missing_keys_the_prefix_fix() -> None:
    shape = ("RuntimeError: Error(s) in loading state_dict for Qwen2ForCausalLM: size mismatch for lm_head.weight: "
             "copying a param with shape torch.Size([151936, 4096]) from checkpoint, the shape in current model is "
             "torch.Size([152064, 4096]).")
    assert "shapes differ" in _first("checkpoint_mismatch", shape)
    keys = 'RuntimeError: Error(s) in loading state_dict for Net: Missing key(s) in state_dict: "fc.weight"'
    assert "wrapper prefix" in _first("checkpoint_mismatch", keys)


def test_a_fix_quoting_a_message_without_its_trailing_colon_is_written_for_it() -> None:
    missing = "ImportError: libcudart.so.11.0: cannot open shared object file: No such file or directory"
    assert "undefined symbol" not in _first("cuda_lib_import", missing)
    symbol = "ImportError: /opt/env/flash_attn_2_cuda.so: undefined symbol: _ZN3c104cuda9SetDeviceEi"
    assert "undefined symbol" in _first("cuda_lib_import", symbol)


@pytest.mark.parametrize(("report", "setting", "value"), [
    ("per_device_train_batch_size 已经是 1 了，还是 CUDA out of memory", "micro-batch size", "1"),
    ("batch size 已经设成 1 了还是 OOM", "micro-batch size", "1"),
    ("gpu_memory_utilization 已经设为 0.95 了", "gpu_memory_utilization", "0.95"),
    ("--per_device_train_batch_size 4 --fp16", "micro-batch size", "4"),
])
def test_a_setting_stated_in_chinese_or_english_is_read(report: str, setting: str, value: str) -> None:
    from agent.stated import read_setup

    assert any(s.setting == setting and s.value == value for s in read_setup([report]).settings)


def test_the_upgrade_fix_leads_an_architecture_or_tokenizer_class_this_release_lacks() -> None:
    tokenizer = "ValueError: Tokenizer class LlamaTokenizer does not exist or is not currently imported."
    assert "upgrade transformers" in _first("hf_api_change", tokenizer)
    arch = ("ValueError: The checkpoint you are trying to load has model type `qwen3` but Transformers does not "
            "recognize this architecture.")
    assert "upgrade transformers" in _first("hf_api_change", arch)
    renamed = "TypeError: TrainingArguments.__init__() got an unexpected keyword argument 'evaluation_strategy'"
    assert "Rename" in _first("hf_api_change", renamed)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_fix_quoting_a_message_cut_short_leads_where_the_log_shows_that_message(lang: str) -> None:
    """nccl_network's GID-index fix quotes `Got completion ... error 12` (the message "Got completion from peer" with its
    variable part elided): an InfiniBand completion error 12 gets it first; a socket connect error does not."""
    book = runbooks()[("nccl_network", lang)]
    ib = "NCCL WARN NET/IB : Got completion from peer 10.0.0.2<51234> with error 12, opcode 0, len 0, vendor err 129"
    first = for_this_message(book.items["fixes"], book.messages, [ib])[0]
    assert "NCCL_IB_GID_INDEX" in "\n".join(first.code)
    socket = "NCCL WARN Net : Connect to 10.0.0.2<43211> failed : Connection refused"
    shown = for_this_message(book.items["fixes"], book.messages, [socket])
    assert not any("NCCL_IB_GID_INDEX" in "\n".join(item.code) for item in shown)
    other_error = "NCCL WARN NET/IB : Got completion from peer 10.0.0.2<51234> with error 5, opcode 0"
    assert "NCCL_IB_GID_INDEX" not in "\n".join(for_this_message(book.items["fixes"], book.messages, [other_error])[0].code)
