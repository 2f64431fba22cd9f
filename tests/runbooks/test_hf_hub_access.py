"""A download the Hugging Face Hub does not serve is its own failure (runbook hf_hub_access): each line shape
huggingface_hub, transformers, datasets and requests print for offline mode, an unreachable Hub, a gated or a private
repository picks the runbook alone; a checkpoint that did arrive but is corrupt, a full disk and a script the library
refuses do not. Offline mode is reproduced for real (local_files_only, an empty cache: no network needed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from runbook_messages import assert_a_line_per_message, assert_picks

from common.language import Lang
from runbooks.catalog import runbooks
from runbooks.choose import for_lines

KIND = "hf_hub_access"
HUB = "https://huggingface.co"

# One real-shaped line per message in the runbook's front matter (the same order).
LINES = [
    f"Access to model acme/gated-lm is restricted and you are not in the authorized list. Visit {HUB}/acme/gated-lm to "
    "ask for access.",
    "Access to model acme/gated-lm is restricted. You must have access to it and be authenticated to access it. "
    "Please log in.",
    f"Cannot access gated repo for url {HUB}/acme/gated-lm/resolve/main/config.json.",
    "OSError: You are trying to access a gated repo.",
    "datasets.exceptions.DatasetNotFoundError: Dataset 'acme/gated-set' is a gated dataset on the Hub. You must be "
    "authenticated to access it.",
    "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find the requested files in the disk cache and outgoing "
    "traffic has been disabled. To enable hf.co look-ups and downloads online, set 'local_files_only' to False.",
    "ConnectionError: Couldn't reach the Hugging Face Hub for dataset 'acme/set': Offline mode is enabled.",
    f"OSError: We couldn't connect to '{HUB}' to load the files, and couldn't find them in the cached files.",
    "huggingface_hub.errors.LocalEntryNotFoundError: An error happened while trying to locate the file on the Hub and "
    "we cannot find the requested files in the local cache. Please check your connection and try again or make sure "
    "your Internet connection is on.",
    f"OSError: checkpoints/llama-8b is not a local folder and is not a valid model identifier listed on '{HUB}/models'",
    "huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. (Request ID: Root=1-6800c1a8;b91c310c) "
    f"Repository Not Found for url: {HUB}/api/models/acme/private-lm/revision/main.",
    "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): Max retries exceeded "
    "with url: /acme/lm/resolve/main/config.json (Caused by NameResolutionError(\"HTTPSConnection(host='huggingface.co', "
    "port=443): Failed to resolve 'huggingface.co' ([Errno -2] Name or service not known)\"))",
    # a mirror set with HF_ENDPOINT, its LFS host timing out on a large shard
    "requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='cdn-lfs-us-1.hf-mirror.com', port=443): Read timed out.",
    "urllib3.exceptions.ConnectTimeoutError: (<urllib3.connection.HTTPSConnection object at 0x7f3a2c1d0>, 'Connection "
    "to huggingface.co timed out. (connect timeout=10)')",
    # a generic message (NCCL's sockets print it too): it names the Hub beside the host it could not reach
    "urllib3.exceptions.NewConnectionError: <urllib3.connection.HTTPSConnection object at 0x7f3a2c1d0>: Failed to "
    "establish a new connection: [Errno 101] Network is unreachable (host='huggingface.co', port=443)",
]

UNRELATED = [
    "_pickle.UnpicklingError: invalid load key, 'v'.",  # a Git LFS pointer that did download: checkpoint_corrupt
    "OSError: [Errno 28] No space left on device",
    "TypeError: Trainer.__init__() got an unexpected keyword argument 'tokenizer'",
]


def _message(i: int) -> str:
    return runbooks()[(KIND, "en")].messages[i]


def test_every_message_has_a_line_here_and_both_languages_list_the_same_ones() -> None:
    assert_a_line_per_message(KIND, LINES)


@pytest.mark.parametrize("line", LINES)
def test_each_line_the_libraries_print_picks_the_runbook(line: str) -> None:
    assert_picks(KIND, [line])


@pytest.mark.parametrize("line", UNRELATED)
def test_an_unrelated_line_does_not_pick_it(line: str) -> None:
    chosen = for_lines([line])
    assert chosen is None or chosen.kind != KIND, (line, chosen.kind)


def test_the_full_disk_still_picks_its_own_runbook() -> None:
    chosen = for_lines(["OSError: [Errno 28] No space left on device"])
    assert chosen is not None and chosen.kind == "disk_full"


def test_offline_with_an_empty_cache_prints_the_offline_message(tmp_path: Path) -> None:
    hub = pytest.importorskip("huggingface_hub")
    errors = pytest.importorskip("huggingface_hub.errors")  # a lazy submodule: not an attribute until imported
    for download in (lambda: hub.hf_hub_download("acme/lm", "config.json", cache_dir=tmp_path, local_files_only=True),
                     lambda: hub.snapshot_download("acme/lm", cache_dir=tmp_path, local_files_only=True)):
        with pytest.raises(errors.LocalEntryNotFoundError, match=re.escape(_message(5))):
            download()


def test_transformers_turns_it_into_the_could_not_connect_message(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    with pytest.raises(OSError, match=re.escape(_message(7))):
        transformers.AutoConfig.from_pretrained("acme/lm", cache_dir=str(tmp_path), local_files_only=True)


def test_the_cache_folder_is_named_as_the_runbook_says() -> None:
    file_download = pytest.importorskip("huggingface_hub.file_download")
    assert file_download.repo_folder_name(repo_id="acme/lm", repo_type="model") == "models--acme--lm"
    assert file_download.repo_folder_name(repo_id="acme/set", repo_type="dataset") == "datasets--acme--set"


def test_an_unreachable_network_names_the_hub_only_beside_the_hub() -> None:
    """``Network is unreachable`` is generic (registry): the lead decision reads it as this kind only where the report
    shows the kind's signal (the Hub's host, HF_ENDPOINT, "无法连接到 huggingface")."""
    from runbooks.choose import quoted_message
    from runbooks.registry import unsignalled_generic

    bare = ["OSError: [Errno 101] Network is unreachable"]
    found = quoted_message(bare, unsignalled_generic(bare[0]))
    assert found is None or found[0].kind != KIND
    hub = ["服务器无法直接连接到 huggingface", *bare]
    found = quoted_message(hub, unsignalled_generic("\n".join(hub)))
    assert found is not None and found[0].kind == KIND


@pytest.mark.parametrize(("report", "lang"), [
    ("from_pretrained on a local folder hangs for five minutes: the library calls the huggingface hub api for the model "
     "card, and our cluster has no internet access", "en"),
    ("load_dataset is stuck: it keeps retrying snapshot_download on nodes without internet", "en"),
    ("训练脚本启动后一直卡住，卡在 huggingface 下载模型那一步，服务器是内网环境", "zh"),
])
def test_a_job_that_hangs_waiting_on_the_hub_is_led_by_hub_access(report: str, lang: Lang) -> None:
    from agent.leads import LeadEvidence, decide

    lead = decide(LeadEvidence(report, None, [], lang))
    assert lead is not None and lead.kind == "hf_hub_access" and lead.rule == "hang_stage", lead


def test_an_air_gapped_cluster_alone_names_no_hub_stage() -> None:
    from agent.leads import LeadEvidence, decide
    from runbooks.registry import signalled

    report = "NCCL all_reduce hangs on our air-gapped cluster with no internet access, 2 nodes of 8 A100"
    lead = decide(LeadEvidence(report, None, [], "en"))
    assert lead is None or lead.kind != "hf_hub_access", lead
    assert signalled("hf_hub_access", report) is not None  # the machine's isolation is the kind's signal, not its stage
    assert signalled("hf_hub_access", "offline RL with a PPO trainer diverges") is None


@pytest.mark.parametrize("report", [
    "`vllm serve Qwen/QwQ-32B-AWQ --tensor-parallel-size 2` hangs with both GPUs at 100%, no log.\n"
    "For anyone rushing to run [Qwen/QwQ-32B](https://huggingface.co/Qwen/QwQ-32B/discussions/11): one GPU works.",
    "FSDP + LoRA training hangs when it saves [Qwen2.5-7B-Instruct](https://huggingface.co/Qwen/Qwen2.5-7B-Instruct)",
])
def test_a_link_to_a_model_page_names_no_hub_stage(report: str) -> None:
    """A model's page linked in a hang report is what was run, not a download the job waits on."""
    from agent.leads import LeadEvidence, decide

    lead = decide(LeadEvidence(report, None, [], "en"))
    assert lead is None or lead.kind != KIND, lead


def test_a_download_from_the_hub_that_hangs_still_names_its_stage() -> None:
    from agent.leads import LeadEvidence, decide

    report = ("the job hangs at start-up, the last line: HTTPSConnectionPool(host='huggingface.co', port=443): "
              "Read timed out")
    lead = decide(LeadEvidence(report, None, [], "en"))
    assert lead is not None and lead.kind == KIND, lead
