"""A GPU that fails in hardware under a correct program is its own failure (runbook gpu_hardware_fault): the driver's
NVRM Xid lines (79 fallen off the bus, 48 double-bit ECC, 95 uncontained error, 119 GSP timeout) and the CUDA errors
the rank on that GPU gets (uncorrectable ECC, uncorrectable NVLink) each pick the runbook. An application's own bad
access (cuda_illegal_access) and the watchdog timeout on the waiting ranks (collective_timeout) do not, and the
runbook's per-Xid actions agree with the Xid catalog traindoc ships (jobs/data/error_codes.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runbook_messages import assert_a_line_per_message, assert_picks

from jobs.codes import meanings
from runbooks.catalog import runbooks
from runbooks.choose import for_lines

KIND = "gpu_hardware_fault"
ROOT = Path(__file__).resolve().parents[2]

# One real-shaped line per message in the runbook's front matter (the same order). The kernel-log shapes follow the
# format strings of NVIDIA/open-gpu-kernel-modules (kernel_rc.c, osinit.c, osapi.c, kernel_gsp.c,
# kern_gpu_error_cont_ga100.c); the CUDA ones are cudaGetErrorString's strings as PyTorch raises them.
LINES = [
    "kernel: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",
    "[rank3]: torch.AcceleratorError: CUDA error: uncorrectable ECC error encountered",
    "kernel: NVRM: Xid (PCI:0000:07:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) "
    "has been detected on GPU in the framebuffer at physAddr 0x7fffa8860 partition 7, subpartition 1.",
    "[rank5]: torch.AcceleratorError: CUDA error: uncorrectable NVLink error detected during the execution",
    "kernel: NVRM: Xid (PCI:0000:1b:00): 119, pid=48211, name=python3, Timeout after 6s of waiting for RPC response "
    "from GPU2 GSP! Expected function 76 (GSP_RM_CONTROL) sequence 5521 (0x20800a4c 0x4).",
    "kernel: NVRM: fallen off the bus and is not responding to commands.",
    "kernel: NVRM: Xid (PCI:0000:01:00): 95, pid=7062, Uncontained: LTC TAG (0x2, 0x1). RST: Yes, D-RST: No",
    "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error",
    "GPU 0000:02:00.0: GPU is lost.  Reboot the system to recover this GPU.",
]

# An application's own bad access: the driver logs Xid 13 for it, but the CUDA error names the kind.
ILLEGAL_ACCESS = [
    "kernel: NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on "
    "(GPC 7, TPC 7, SM 0): Illegal Instruction Parameter",
    "[rank0]: torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
]
WATCHDOG = ("[rank0]:[E1125 10:02:11.201000 1234 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=8812, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
            "ran for 600046 milliseconds before timing out.")
LAUNCH_FAILURE = "[rank2]: torch.AcceleratorError: CUDA error: unspecified launch failure"


def test_every_message_has_a_line_here_and_both_languages_list_the_same_ones() -> None:
    assert_a_line_per_message(KIND, LINES)


@pytest.mark.parametrize("line", LINES)
def test_each_line_picks_the_runbook(line: str) -> None:
    assert_picks(KIND, [line])


def test_a_launch_failure_beside_an_xid_79_is_the_hardware_fault() -> None:
    assert_picks(KIND, [LAUNCH_FAILURE, LINES[0]])


def test_a_launch_failure_alone_stays_with_the_illegal_access_runbook() -> None:
    chosen = for_lines([LAUNCH_FAILURE])
    assert chosen is not None and chosen.kind == "cuda_illegal_access"


def test_an_application_fault_with_its_xid_13_picks_the_illegal_access_runbook() -> None:
    chosen = for_lines(ILLEGAL_ACCESS)
    assert chosen is not None and chosen.kind == "cuda_illegal_access"


def test_the_waiting_ranks_watchdog_line_is_not_the_hardware_fault() -> None:
    chosen = for_lines([WATCHDOG])
    assert chosen is None or chosen.kind != KIND


def _catalog_xids() -> dict[str, dict[str, object]]:
    data = json.loads((ROOT / "jobs" / "data" / "error_codes.json").read_text(encoding="utf-8"))
    return next(family["codes"] for family in data["families"] if family["id"] == "xid")


def _table_rows() -> dict[str, str]:
    """{Xid code: the runbook table's immediate action}, from the English runbook's table."""
    rows: dict[str, str] = {}
    for line in runbooks()[(KIND, "en")].path.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0][:1].isdigit():
            for code in cells[0].split("/"):
                rows[code.strip()] = cells[2]
    return rows


def test_the_runbook_table_follows_the_xid_catalog_resolution() -> None:
    codes, rows = _catalog_xids(), _table_rows()
    assert set(rows) == {"79", "48", "94", "95", "63", "64", "74", "92", "119", "120"}
    wording = {"RESTART_BM": "reboot the node", "RESET_GPU": "reset the GPU", "RESTART_APP": "restart the app",
               "IGNORE": "", "WORKFLOW_XID_48": "restart the app", "WORKFLOW_NVLINK_ERR": "WORKFLOW_NVLINK_ERR"}
    for code, action in rows.items():
        resolution = str(codes[code]["resolution"])
        assert wording[resolution].lower() in action.lower(), (code, resolution, action)


def test_the_shipped_xid_catalog_reads_the_codes_off_these_kernel_lines() -> None:
    found = {m.code: m.name for m in meanings([LINES[0], LINES[2], LINES[4], LINES[6]]) if m.family == "xid"}
    assert found == {"79": "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "48": "ROBUST_CHANNEL_GPU_ECC_DBE",
                     "119": "GSP_RPC_TIMEOUT", "95": "ROBUST_CHANNEL_UNCONTAINED_ERROR"}
