"""`ask` with live probes, a target interpreter, a bundle from another machine, and a hung probe."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.fake_torch import write_fake_torch
from integration_kit import (
    PROBE_TIMEOUT_VAR,
    ask_json,
    assert_one_line_error,
    codes,
    fake_bin,
    fake_secret,
    finding,
    nvml_answers,
    path_with,
    pid_alive,
    run,
    wrapper_interpreter,
    write_bundle,
)

from tools.base import Finding, ProbeResult, Status

PROBE_HEADING = "### What the probes found"
BLACKWELL_DOC = "corpus/000_a1161a68fffab229.txt"


# -- 1. a port held by this very test ---------------------------------------------

@pytest.fixture
def held_port() -> Iterator[int]:
    """A real listening socket on 127.0.0.1, on a free port the kernel picked."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_port_in_use_names_this_process(held_port):
    answer, _ = ask_json(f"torchrun says Address already in use on port {held_port}")
    port = finding(answer, "PORT_IN_USE")
    assert port["probe"] == "port_check" and port["status"] == "problem"
    assert f"pid {os.getpid()}" in port["summary"] + port["evidence"]
    assert str(held_port) in port["summary"]
    body = answer["answer"]
    assert PROBE_HEADING in body and "### Likely cause" in body
    assert body.index(PROBE_HEADING) < body.index("### Likely cause")
    assert body.index("PORT_IN_USE") < body.index("### Likely cause")
    cited = {c["n"] for c in answer["citations"]}
    assert cited, "a port question should cite the port sections"
    for f in answer["findings"]:
        assert set(f["related"]) <= cited, f
    assert port["related"], "the port finding should point at the sections about busy ports"


def test_no_probes_means_no_findings(held_port):
    answer, _ = ask_json("--no-probes", f"torchrun says Address already in use on port {held_port}")
    assert answer["findings"] == []
    assert PROBE_HEADING not in answer["answer"]
    assert answer["citations"], "retrieval still answers"


# -- 2. sm_120 through the user's interpreter (--python) ---------------------------

@pytest.fixture
def blackwell_python(tmp_path: Path) -> tuple[Path, Path]:
    """(wrapper interpreter, file with one line per interpreter start): torch 2.5.1+cu124, arch list
    sm_50..sm_90, one RTX 5090 (capability 12.0)."""
    site = write_fake_torch(tmp_path / "site", version="2.5.1+cu124", cuda="12.4",
                            devices=(("NVIDIA GeForce RTX 5090", (12, 0)),))
    starts = tmp_path / "starts"
    return wrapper_interpreter(tmp_path / "python", site, starts), starts


def test_sm120_finding_from_the_target_interpreter(blackwell_python):
    python, starts = blackwell_python
    answer, _ = ask_json("--python", str(python), "RTX 5090 sm_120 not compatible with the current PyTorch")
    arch = finding(answer, "CUDA_ARCH_UNSUPPORTED")
    assert arch["probe"] == "torch_cuda_compat" and arch["status"] == "problem"
    assert "cu128" in arch["fix"] and "2.7" in arch["fix"]
    # No NVML or nvidia-smi here: the device and its capability come from the interpreter's own torch.
    assert "RTX 5090" in arch["evidence"] and "capability 12.0" in arch["evidence"]
    assert "sm_90" in arch["evidence"] and "12.4" in arch["evidence"]
    if not nvml_answers():
        assert any(f["probe"] == "gpu_inventory" and f["status"] == "unavailable" for f in answer["findings"])
    assert answer["citations"][0]["source"] == "corpus/runbooks/en/arch_mismatch.md"  # traindoc's runbook leads
    first = next(c for c in answer["citations"] if "/runbooks/" not in c["source"])  # then the documents' section
    assert first["source"] == BLACKWELL_DOC
    assert "CUDA兼容性" in first["section"].split(" > ")[-1]
    assert first["n"] in arch["related"]
    assert starts.read_text().count("start") == 1


def test_sm120_answer_never_recommends_cu124_as_current(blackwell_python):
    python, _ = blackwell_python
    answer, _ = ask_json("--python", str(python), "RTX 5090 sm_120 not compatible with the current PyTorch")
    body = answer["answer"]
    assert "whl/cu124" not in body
    assert "whl/cu128" in body
    for line in body.splitlines():
        if re.search(r"cu124|CUDA 12\.4", line, re.IGNORECASE) and not re.match(r"\s*- Do not\b", line):
            assert re.search(r"stale|out of date", line, re.IGNORECASE), f"cu124 mentioned as if current: {line!r}"


def test_one_interpreter_start_for_both_interpreter_probes(blackwell_python):
    """torch_cuda_compat and versions share one run of the target interpreter."""
    python, starts = blackwell_python
    answer, _ = ask_json("--python", str(python), "sm_120 not compatible, is it a torch version mismatch?")
    probes = {f["probe"] for f in answer["findings"]}
    assert {"torch_cuda_compat", "versions"} <= probes
    assert "CUDA_ARCH_UNSUPPORTED" in codes(answer)
    assert starts.read_text().count("start") == 1


def test_missing_target_interpreter_is_reported_not_replaced(tmp_path):
    answer, _ = ask_json("--python", str(tmp_path / "nope" / "python"), "sm_120 not compatible")
    compat = [f for f in answer["findings"] if f["probe"] == "torch_cuda_compat"]
    assert compat and compat[0]["status"] == "unavailable"
    assert str(tmp_path / "nope" / "python") in compat[0]["summary"]


# -- 3. a bundle from another machine --------------------------------------------

def node_results(secret: str) -> list[ProbeResult]:
    ifname = Finding(
        "NCCL_IFNAME_MISSING", "problem", "NCCL_SOCKET_IFNAME=ib7 matches no network interface on this node",
        f"NCCL_SOCKET_IFNAME=ib7; interfaces here: eth0, lo; HF_TOKEN={secret}",
        "Set NCCL_SOCKET_IFNAME to an interface that exists on every node, e.g. `export NCCL_SOCKET_IFNAME=eth0`.",
        ("nccl_socket_ifname", "network interface", "nccl hang", "bootstrap"))
    shm = Finding("SHM_TOO_SMALL", "problem", "/dev/shm is 64 MiB on node-7", "/dev/shm: 64.0 MiB total",
                  "Start the container with --shm-size=16g (or --ipc=host).", ("/dev/shm", "bus error", "shm"))
    return [
        ProbeResult("gpu_inventory", Status.OK, "8 GPU(s), driver 570.86.10 on node-7", (),
                    {"driver_version": "570.86.10", "gpus": []}),
        ProbeResult("port_check", Status.OK, "port(s) 29500 free on node-7", (), {"ports": {}}),
        ProbeResult("env_vars", Status.PROBLEM, ifname.summary, (ifname,),
                    {"variables": {"NCCL_SOCKET_IFNAME": "ib7", "HF_TOKEN": secret,
                                   "NCCL_DEBUG_FILE": f"/logs/nccl.%h?token={secret}"},
                     "interfaces": ["eth0", "lo"]}),
        ProbeResult("disk_and_memory", Status.PROBLEM, shm.summary, (shm,), {"shm_bytes": 64 << 20}),
        ProbeResult("versions", Status.OK, "Python 3.10.12; torch 2.7.0", (),
                    {"python": "3.10.12", "packages": {"torch": "2.7.0"}}),
    ]


def test_bundle_findings_come_from_the_bundle(tmp_path):
    secret = fake_secret()
    path = write_bundle(tmp_path / "node7.json", node_results(secret))
    assert secret not in path.read_text(), "tools.report.bundle masks secrets when it writes"
    answer, result = ask_json("--bundle", str(path), "NCCL hangs at init")
    ifname = finding(answer, "NCCL_IFNAME_MISSING")
    assert ifname["probe"] == "env_vars" and ifname["status"] == "problem"
    assert "ib7" in ifname["summary"] and "eth0, lo" in ifname["evidence"]
    assert "SHM_TOO_SMALL" in codes(answer), "a problem in the bundle is shown even when the question is elsewhere"
    port = [f for f in answer["findings"] if f["probe"] == "port_check"]
    # this machine was not probed; the bundle's own words are quoted and labelled, not traindoc's (tools/verdicts.py)
    assert port and port[0]["summary"] == 'node7.json reports: "port(s) 29500 free on node-7"'
    assert "versions" not in {f["probe"] for f in answer["findings"]}, "irrelevant probes without problems are left out"
    cited = {c["n"] for c in answer["citations"]}
    assert all(set(f["related"]) <= cited for f in answer["findings"])
    assert secret not in result.stdout + result.stderr
    assert answer["answer"].index("NCCL_IFNAME_MISSING") < answer["answer"].index("### Likely cause")


def test_unmasked_bundle_secret_is_never_printed(tmp_path):
    import json

    secret = fake_secret()
    data = {"traindoc_bundle": 1, "host": "node-7", "results": [r.to_dict() for r in node_results(secret)]}
    path = tmp_path / "hand-edited.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    result = run("ask", "--json", "--bundle", str(path), "NCCL hangs at init")
    assert result.returncode == 0, result.stderr
    assert secret not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not JSON"),
        ('{"results": []}', "not a traindoc bundle"),
        ('{"traindoc_bundle": 0, "results": []}', "not a traindoc bundle"),
        ('{"traindoc_bundle": 1, "results": [{"probe": "env_vars"}]}', "results[0].status: missing"),
        ('{"traindoc_bundle": 1, "results": [{"probe": "env_vars", "status": "weird", "summary": ""}]}',
         "results[0].status: must be one of"),
        ("[1, 2]", "not a traindoc bundle"),
        (None, "cannot read it"),
    ],
    ids=["not-json", "no-marker", "wrong-version", "missing-keys", "bad-status", "a-list", "missing-file"],
)
def test_malformed_bundle_is_one_line_error(tmp_path, content, message):
    path = tmp_path / "bundle.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    result = run("ask", "--json", "--bundle", str(path), "NCCL hangs at init")
    assert_one_line_error(result, "ask")
    assert message in result.stderr and str(path) in result.stderr


# -- 5. a probe that hangs -----------------------------------------------------------

def test_hung_nvidia_smi_does_not_hang_ask(tmp_path):
    pidfile = tmp_path / "smi.pid"
    bindir = fake_bin(tmp_path / "bin", "nvidia-smi", f'echo $$ >> "{pidfile}"\nexec sleep 60\n')
    env = {"PATH": path_with(bindir), PROBE_TIMEOUT_VAR: "2"}
    baseline = run("ask", "--json", "--no-probes", "CUDA out of memory", env=env)
    assert baseline.returncode == 0, baseline.stderr
    answer, result = ask_json("CUDA out of memory", env=env, timeout=60)
    # The probes run while the index loads; a 2 s probe limit (+1 s for the sweep) adds at most ~3 s.
    assert result.seconds < baseline.seconds + 2 + 1 + 3, (result.seconds, baseline.seconds)
    gpu = [f for f in answer["findings"] if f["probe"] == "gpu_inventory"]
    assert gpu, codes(answer)
    if not nvml_answers():
        assert gpu[0]["status"] == "timed_out" and "nvidia-smi" in gpu[0]["summary"]
        assert pidfile.exists()
    assert {"processes", "disk_and_memory"} <= {f["probe"] for f in answer["findings"]}
    assert answer["citations"], "the documents still answer"
    for pid in map(int, pidfile.read_text().split() if pidfile.exists() else []):
        assert not pid_alive(pid), f"hung nvidia-smi (pid {pid}) was left running"


def test_default_probe_timeout_bounds_ask(tmp_path):
    """No flag lowers the probe limit for `ask` (only TRAINDOC_PROBE_TIMEOUT); the default is 10 s."""
    bindir = fake_bin(tmp_path / "bin", "nvidia-smi", "exec sleep 60\n")
    answer, result = ask_json("CUDA out of memory", env={"PATH": path_with(bindir)}, timeout=60)
    assert result.seconds < 10 + 1 + 8, result.seconds
    if not nvml_answers():
        assert any(f["probe"] == "gpu_inventory" and f["status"] == "timed_out" for f in answer["findings"])


def test_bad_probe_timeout_setting_is_one_line_error():
    result = run("ask", "--json", "CUDA out of memory", env={PROBE_TIMEOUT_VAR: "soon"})
    assert_one_line_error(result, "ask", code=2)  # a bad setting is bad usage (README: exit codes)
    assert PROBE_TIMEOUT_VAR in result.stderr
