"""The job's communication settings the check runs with: from the shell, a bundle, the job's log; later sources win."""

from __future__ import annotations

from pathlib import Path

from checks.variables import from_bundle_data, from_environ, from_lines, from_log, merged, missing_interfaces


def test_the_log_printed_variables_are_read() -> None:
    lines = ["host:1:2 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ib0.",
             "+ export NCCL_IB_DISABLE=1", "launch: NCCL_P2P_DISABLE=1 TORCH_NCCL_BLOCKING_WAIT=0 torchrun train.py",
             "HF_TOKEN=hf_abc NCCL_DEBUG=INFO", "GLOO_SOCKET_IFNAME='eth0;curl x|sh'", "NCCL_ALGO=***"]
    found = {s.name: s.value for s in from_lines(lines, "train.log")}
    assert found == {"NCCL_SOCKET_IFNAME": "ib0", "NCCL_IB_DISABLE": "1", "NCCL_P2P_DISABLE": "1",
                     "TORCH_NCCL_BLOCKING_WAIT": "0", "NCCL_DEBUG": "INFO"}  # no token, no shell, no masked value


def test_a_log_file_is_read_as_ask_reads_it(tmp_path: Path) -> None:
    log = tmp_path / "rank0.log"
    log.write_text("[default0]:node:1:2 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth1\n")
    assert [(s.name, s.value, s.source) for s in from_log([log])] == [("NCCL_SOCKET_IFNAME", "eth1", str(log))]


def test_a_bundles_env_vars_and_the_order_of_sources() -> None:
    bundle = {"results": [{"probe": "gpu_inventory", "evidence": {}},
                          {"probe": "env_vars", "evidence": {"variables": {"NCCL_SOCKET_IFNAME": "eth9", "MASTER_ADDR": "n0",
                                                                           "NCCL_IB_HCA": "***"}}}]}
    shell = from_environ({"NCCL_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "WARN", "PATH": "/bin"})
    table = merged(shell, from_bundle_data(bundle, "node3.json"), from_lines(["NCCL_DEBUG=INFO"], "train.log"))
    assert {n: (s.value, s.source) for n, s in table.items()} == {
        "NCCL_SOCKET_IFNAME": ("eth9", "node3.json"), "NCCL_DEBUG": ("INFO", "train.log")}
    assert [s.name for s in missing_interfaces(table, ["eth0", "lo"])] == ["NCCL_SOCKET_IFNAME"]
    assert missing_interfaces(merged(from_environ({"NCCL_SOCKET_IFNAME": "^docker,lo"})), ["eth0", "lo"]) == []
