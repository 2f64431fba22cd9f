import time

import pytest

from tools import registry
from tools.base import ProbeContext, ProbeResult, Status


def test_table_has_all_probes_with_descriptions():
    assert list(registry.PROBES) == ["gpu_inventory", "torch_cuda_compat", "port_check", "env_vars", "processes",
                                     "log_grep", "disk_and_memory", "versions", "system_info", "cuda_toolkit",
                                     "compiler", "deepspeed_ops"]
    for spec in registry.PROBES.values():
        assert spec.description and "\n" not in spec.description


def test_duplicate_name_fails():
    row = ("x", lambda ctx: None, lambda ctx: (True, ""))
    with pytest.raises(ValueError, match="duplicate probe name"):
        registry.build_table(row, row)


def ok_probe(name):
    return lambda ctx: ProbeResult(name, Status.OK, "fine")


def slow(ctx):
    time.sleep(3)
    return ProbeResult("slow", Status.OK, "late")


def boom(ctx):
    raise RuntimeError("bug")


TABLE = registry.build_table(
    ("a", ok_probe("a"), lambda ctx: (True, "")),
    ("gone", ok_probe("gone"), lambda ctx: (False, "NVML library not found")),
    ("slow", slow, lambda ctx: (True, "")),
    ("boom", boom, lambda ctx: (True, "")),
    ("b", ok_probe("b"), lambda ctx: (True, "")),
)


def test_run_probes_order_unavailable_timeout_and_crash():
    ctx = ProbeContext(environ={}, timeout_s=0.3)
    start = time.monotonic()
    results = registry.run_probes(None, ctx, max_workers=4, table=TABLE)
    assert time.monotonic() - start < 0.3 + 1.0 + 0.5
    assert [r.probe for r in results] == ["a", "gone", "slow", "boom", "b"]
    by = {r.probe: r for r in results}
    assert by["gone"].status == Status.UNAVAILABLE and by["gone"].summary == "NVML library not found"
    assert by["slow"].status == Status.TIMED_OUT
    assert by["boom"].status == Status.ERROR and "RuntimeError: bug" in by["boom"].summary


def test_run_probes_subset_and_unknown():
    results = registry.run_probes(["b", "nope"], ProbeContext(environ={}), table=TABLE)
    assert [(r.probe, r.status) for r in results] == [("b", Status.OK), ("nope", Status.ERROR)]


@pytest.mark.parametrize(
    ("text", "must", "must_not"),
    [
        ("torchrun NCCL hang after 30 minutes, watchdog timeout",
         {"port_check", "env_vars", "processes", "gpu_inventory"}, {"log_grep"}),
        ("RuntimeError: The server socket has failed to bind: Address already in use", {"port_check", "processes"},
         set()),
        ("RTX 5090 sm_120 is not compatible with the current PyTorch installation",
         {"torch_cuda_compat", "gpu_inventory"}, {"port_check"}),
        ("CUDA error: no kernel image is available for execution on the device", {"torch_cuda_compat"}, set()),
        ("torch.OutOfMemoryError: CUDA out of memory", {"gpu_inventory", "processes", "disk_and_memory"},
         {"port_check"}),
        ("checkpoint save fails: No space left on device", {"disk_and_memory"}, {"port_check"}),
        ("deepspeed version mismatch with torch", {"versions"}, set()),
        ("see /var/log/train.log for the traceback", {"log_grep"}, set()),
        ("多机训练卡住，NCCL 超时", {"port_check", "env_vars", "processes", "gpu_inventory"}, set()),
        ("端口被占用", {"port_check"}, set()),
        ("训练时显存不足", {"gpu_inventory", "processes", "disk_and_memory"}, {"port_check"}),
        ("how do I import a support report", set(), {"port_check", "disk_and_memory"}),
    ],
)
def test_select_probes(text, must, must_not):
    picked = registry.select_probes(text)
    assert must <= set(picked), picked
    assert not (must_not & set(picked)), picked
    assert picked == [n for n in registry.PROBES if n in picked]  # table order
