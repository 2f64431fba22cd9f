"""A job that runs but slowly is its own kind (runbook slow_training): it prints no error, so the runbook quotes the
warnings that name a cause (the DataLoader's worker-count warning, Lightning's few-workers warning, DDP's needless
unused-parameter search, NCCL's transport lines, PyTorch's sync-debug warning, vLLM's eager mode), and each such line
picks it; a crashed DataLoader worker, a collective timeout, NCCL on InfiniBand, a broken NVLink P2P or a vLLM KV-cache
failure do not. The torch facts the runbook's checks rely on are checked against the installed torch on CPU."""

from __future__ import annotations

import warnings

import pytest
import torch
from runbook_messages import assert_a_line_per_message, assert_picks
from torch.profiler import ProfilerActivity, profile, schedule
from torch.utils.data import DataLoader
from torch.utils.data.dataloader import _MultiProcessingDataLoaderIter

from runbooks.catalog import runbooks
from runbooks.choose import for_lines

KIND = "slow_training"
SITE = "/opt/venv/lib/python3.11/site-packages"

# One real-shaped line per message in the runbook's front matter (the same order), as each library prints it.
LINES = [
    f"{SITE}/torch/utils/data/dataloader.py:627: UserWarning: This DataLoader will create 16 worker processes in "
    "total. Our suggested max number of worker in current system is 8, which is smaller than what this DataLoader is "
    "going to create. Please be aware that excessive worker creation might get DataLoader running slow or even freeze, "
    "lower the worker number to avoid potential slowness/freeze if necessary.",
    f"{SITE}/lightning/pytorch/trainer/connectors/data_connector.py:425: The 'train_dataloader' does not have many "
    "workers which may be a bottleneck. Consider increasing the value of the `num_workers` argument` to "
    "`num_workers=31` in the `DataLoader` to improve performance.",
    "[rank0]:[W reducer.cpp:1400] Warning: find_unused_parameters=True was specified in DDP constructor, but did not "
    "find any unused parameters in the forward pass. This flag results in an extra traversal of the autograd graph "
    "every iteration,  which can adversely affect performance.",
    "gpu-node-3:41822:41822 [0] NCCL INFO P2P is disabled between connected GPUs 0 and 1. You can repress this message "
    "with NCCL_IGNORE_DISABLED_P2P=1.",
    "/work/train.py:57: UserWarning: called a synchronizing CUDA operation (Triggered internally at "
    "/pytorch/c10/cuda/CUDAFunctions.cpp:198.)",
    "WARNING 11-27 10:02:11 [vllm.py:896] Enforce eager set, disabling torch.compile and CUDAGraphs. This is "
    "equivalent to setting -cc.mode=none -cc.cudagraph_mode=none",
    "gpu-node-3:41822:41822 [0] NCCL INFO Using network Socket",
]

NEIGHBOURS = {
    # a worker that died stops the job: the crashed-worker runbook, not a slow loader
    "RuntimeError: DataLoader worker (pid 18234) is killed by signal: Killed.": "dataloader_worker",
    # a collective that never completes is a timeout, however slow the job was before
    "[rank0]:[E ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, "
    "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600042 milliseconds before timing out.":
        "collective_timeout",
    "ValueError: To serve at least one request with the models's max seq len (32768), (4.00 GiB KV cache is needed, "
    "which is larger than the available KV cache memory (2.51 GiB).": "vllm_kv_cache",
}

NOT_SLOW = [
    # NCCL on InfiniBand is the fast path
    "gpu-node-3:41822:41822 [0] NCCL INFO Using network IB",
    # NVLink GPUs that NVML reports without P2P are a hardware fault: NCCL stops, the job is not merely slow
    "gpu-node-3:41822:41822 [0] NCCL WARN P2P is disabled between NVLINK connected GPUs 0 and 1. This should not be "
    "the case given their connectivity, and is probably due to a hardware issue. If you still want to proceed, you can "
    "set NCCL_IGNORE_DISABLED_P2P=1.",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
    "79.10 GiB of which 1.19 GiB is free. Including non-PyTorch memory, this process has 77.90 GiB memory in use.",
]


def test_every_message_has_a_line_here_and_both_languages_list_the_same_ones() -> None:
    assert_a_line_per_message(KIND, LINES)


@pytest.mark.parametrize("line", LINES)
def test_each_warning_that_names_a_cause_picks_the_runbook(line: str) -> None:
    assert_picks(KIND, [line])


@pytest.mark.parametrize("line, kind", NEIGHBOURS.items())
def test_a_neighbouring_failure_keeps_its_own_runbook(line: str, kind: str) -> None:
    chosen = for_lines([line])
    assert chosen is not None and chosen.kind == kind, (line, chosen and chosen.kind)


@pytest.mark.parametrize("line", NOT_SLOW)
def test_a_line_that_names_no_slow_path_does_not_pick_it(line: str) -> None:
    chosen = for_lines([line])
    assert chosen is None or chosen.kind != KIND, line


def test_too_many_workers_print_the_first_message_exactly() -> None:
    cores = torch._utils.cpu_count()  # what the DataLoader compares num_workers with (sched_getaffinity)
    assert cores is not None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        DataLoader(range(4), num_workers=cores + 1)  # the check runs in __init__: no worker is started
    said = [str(w.message) for w in caught]
    assert any(runbooks()[(KIND, "en")].messages[0] in text for text in said), said
    assert any(f"This DataLoader will create {cores + 1} worker processes in total" in text for text in said), said


def test_workers_within_the_cores_print_no_warning() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        DataLoader(range(4), num_workers=1)
    assert not [w for w in caught if "suggested max number of worker" in str(w.message)]


def test_the_frames_check_2_names_are_the_dataloaders_own() -> None:
    for name in ("_next_data", "_try_get_data", "_get_data"):
        assert callable(getattr(_MultiProcessingDataLoaderIter, name)), name


def test_the_profiler_rows_check_3_names_appear_for_data_waits_and_syncs() -> None:
    layer = torch.nn.Linear(4, 1)
    loader = DataLoader(torch.randn(32, 4), batch_size=4)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=3, repeat=1)) as prof:
        for step, batch in enumerate(loader):
            loss = layer(batch).sum()
            loss.backward()
            loss.item()  # the per-step sync the runbook tells the reader to look for
            prof.step()
            if step >= 5:
                break
    keys = {event.key for event in prof.key_averages()}
    assert "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__" in keys, sorted(keys)
    assert {"aten::item", "aten::_local_scalar_dense"} <= keys, sorted(keys)
