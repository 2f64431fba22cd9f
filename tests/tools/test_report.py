import json

import pytest
from rich.console import Console

from tools import report
from tools.base import Finding, ProbeContext, ProbeResult, Status


def node(torch="2.5.1+cu124", nccl="2.21.5", ifname="eth0", nics=("eth0", "lo"), gpu="NVIDIA H100 80GB HBM3",
         token="hf_abcdefghijklmnopqrstuvwxyz"):
    return [
        ProbeResult("gpu_inventory", Status.OK, "1 GPU", (), {"driver_version": "550.54.15", "gpus": [{"name": gpu}]}),
        ProbeResult("torch_cuda_compat", Status.OK, "ok", (), {"report": {"torch": torch, "torch_cuda": "12.4",
                                                                           "nccl": nccl, "python": "3.11.7"}}),
        ProbeResult("env_vars", Status.OK, "ok", (Finding("NCCL_DEBUG_UNSET", "info", "s", "e"),),
                    {"variables": {"NCCL_SOCKET_IFNAME": ifname, "TORCH_HUB_TOKEN": token}, "interfaces": list(nics)}),
    ]


def test_report_prints_every_probe_verbatim_with_readable_evidence():
    console = Console(width=80, record=True)
    results = node() + [ProbeResult("log_grep", Status.PROBLEM, "[rank3]: CUDA out of memory"),
                        ProbeResult("disk_and_memory", Status.OK, "ok", (), {"disks": {"/ckpt": {"free_bytes": 3 * 2**30}}})]
    console.print(report.render_report(results), markup=False, highlight=False, soft_wrap=True)
    text = console.export_text()
    for name in ("gpu_inventory", "env_vars", "log_grep", "PROBLEM", "[rank3]: CUDA out of memory"):
        assert name in text
    lines = text.splitlines()
    assert "    driver_version: 550.54.15" in lines
    assert "    gpus[0].name: NVIDIA H100 80GB HBM3" in lines
    assert "    report.torch: 2.5.1+cu124" in lines
    assert "    interfaces: eth0, lo" in lines
    assert "    disks./ckpt.free_bytes: 3.0 GiB" in lines
    assert not any(line.lstrip().startswith("{") for line in lines)  # no JSON squeezed into a cell


def test_bundle_round_trip_masks_secrets(tmp_path):
    data = report.bundle(node(), ProbeContext(environ={}))
    assert data["traindoc_bundle"] == 1 and data["host"] and data["created"]
    text = json.dumps(data)
    assert "hf_abcdefghij" not in text
    path = tmp_path / "b.json"
    path.write_text(text)
    loaded = report.load_bundle(path)
    assert [r.probe for r in loaded] == ["gpu_inventory", "torch_cuda_compat", "env_vars"]
    assert loaded[2].findings[0].code == "NCCL_DEBUG_UNSET"


@pytest.mark.parametrize("content", ["not json", "[]", '{"traindoc_bundle": 0, "results": []}',
                                     '{"traindoc_bundle": 1, "results": [{"probe": "env_vars"}]}'])
def test_load_bundle_rejects_bad_files(tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ValueError, match="bad.json"):
        report.load_bundle(path)


def test_compare_bundles():
    same = report.compare_bundles({"a": node(), "b": node()})
    assert same == []
    diff = report.compare_bundles({"a": node(), "b": node(torch="2.4.0+cu121", nccl="2.20.5", ifname="eth0",
                                                          nics=("ens5", "lo"), gpu="NVIDIA A100")})
    codes = {f.code for f in diff}
    assert {"NODES_DIFFER_TORCH", "NODES_DIFFER_NCCL", "NODES_DIFFER_GPU_MODELS", "NODE_IFNAME_MISSING"} <= codes
    ifname = next(f for f in diff if f.code == "NODE_IFNAME_MISSING")
    assert "b" in ifname.summary and "ens5" in ifname.evidence


@pytest.mark.parametrize(("content", "note"), [
    ('{"traindoc_bundle": 2, "results": []}', "made by a newer traindoc"),
    ('{"traindoc_bundle": 1, "results": [{"probe": "x"}]}', "left out 1 result this traindoc cannot read: x"),
])
def test_a_newer_bundle_or_an_unknown_probe_is_read_with_a_note(tmp_path, caplog, content, note):
    path = tmp_path / "new.json"
    path.write_text(content)
    with caplog.at_level("WARNING"):
        assert report.load_bundle(path) == []
    assert any(note in r.getMessage() and "new.json" in r.getMessage() for r in caplog.records)
