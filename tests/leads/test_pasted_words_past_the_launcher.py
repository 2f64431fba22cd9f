"""Issue 36 point 2: a pasted report whose cascade shows only the launcher stopping its ranks (torchrun's
SignalException, DeepSpeed's "Killing subprocess") still has its own words: a message it quotes decides (wandb's
missing API key), where a log read from files would only ask for the lines above the launcher's. The asker stating that
a Hub download times out ("用 huggingface_hub 下载模型一直 timeout，是被墙的原因吗") names hf_hub_access, whatever the
generic TimeoutError below it. Real tables and index (tests/conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest

from runbooks.registry import stated_kind
from tests.clikit import ask_json, lead_kind

LAUNCHER = (
    '  File "/opt/conda/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/api.py", line 79, in '
    "_terminate_process_handler\n"
    '    raise SignalException(f"Process {os.getpid()} got signal: {sigval}", sigval=sigval)\n'
    "torch.distributed.elastic.multiprocessing.api.SignalException: Process 31337 got signal: 15\n")


@pytest.mark.usefixtures("use_shared_index")
def test_a_quoted_message_above_the_launchers_lines_decides(cli: Any) -> None:
    answer = ask_json(cli, "跑 finetune.sh 时报错了\n"
                           "wandb.errors.UsageError: api_key not configured (no-tty). call wandb.login(key=[your_api_key])\n"
                           + LAUNCHER)
    assert lead_kind(answer) == "wandb_init_failure", answer.get("lead")


@pytest.mark.usefixtures("use_shared_index")
def test_launcher_lines_alone_still_lead_with_nothing(cli: Any) -> None:
    answer = ask_json(cli, "why did my job stop?\n" + LAUNCHER)
    assert lead_kind(answer) is None, answer.get("lead")


@pytest.mark.parametrize(("text", "kind"), [
    ("在开发机上用 huggingface_hub 下载模型一直 timeout，是被墙的原因吗？", "hf_hub_access"),
    ("snapshot_download keeps failing with a timed out error on our cluster", "hf_hub_access"),
])
def test_a_hub_download_that_times_out_is_stated(text: str, kind: str) -> None:
    found = stated_kind(text)
    assert found is not None and found[0] == kind, found


def test_a_timeout_elsewhere_states_no_hub_access() -> None:
    found = stated_kind("NCCL watchdog timed out after 1800 seconds while loading the model from_pretrained earlier")
    assert found is None or found[0] != "hf_hub_access", found


@pytest.mark.parametrize("text", [
    "ds_z3_config.json stage3_prefetch_bucket_size 应该是一个整数，为什么？",
    "DeepSpeed says reduce_bucket_size must be an integer, but I set it to 5e8",
])
def test_a_deepspeed_key_of_the_wrong_type_is_stated(text: str) -> None:
    found = stated_kind(text)
    assert found is not None and found[0] == "deepspeed_config", found
