"""`traindoc probe`: the verdict table, the JSON bundle (secrets masked) and `--compare` across nodes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from integration_kit import assert_one_line_error, fake_secret, run, spawn, write_bundle

from tools.base import ProbeResult, Status
from tools.registry import PROBES


@pytest.fixture
def secret_env(tmp_path: Path):
    """HF_TOKEN in the environment, the same token on a running training process's command line and in a
    log, plus an NCCL_SOCKET_IFNAME that must show."""
    secret = fake_secret()
    train = tmp_path / "train.py"
    train.write_text("import time\ntime.sleep(60)\n", encoding="utf-8")
    proc = spawn([sys.executable, str(train), "--hf_token", secret, f"HF_TOKEN={secret}"])
    log = tmp_path / "train.log"
    log.write_text(f"[rank0]: loading with HF_TOKEN={secret}\n[rank0]:torch.OutOfMemoryError: CUDA out of memory.\n",
                   encoding="utf-8")
    env = {"HF_TOKEN": secret, "NCCL_SOCKET_IFNAME": "ens9zz", "TORCH_HUB_TOKEN": secret}
    try:
        yield secret, env, log
    finally:
        proc.kill()
        proc.wait()


def test_table_lists_every_probe(secret_env):
    secret, env, log = secret_env
    result = run("traindoc", "probe", "--log", str(log), env=env)
    assert result.returncode == 0, result.stderr
    for check in ("GPUs", "torch", "ports", "environment", "training processes", "log scan", "disk", "Python", "OS",
                  "CUDA toolkit (nvcc)", "C/C++ compiler", "DeepSpeed"):
        assert check in result.stdout, check
    assert "ens9zz" in result.stdout
    assert secret not in result.stdout + result.stderr
    verbose = run("traindoc", "probe", "-v", "--log", str(log), env=env)
    assert verbose.returncode == 0, verbose.stderr
    for name in PROBES:  # -v adds each probe's own section under the table
        assert name in verbose.stdout, name
    assert secret not in verbose.stdout + verbose.stderr


def test_json_bundle_masks_secrets(secret_env):
    secret, env, log = secret_env
    result = run("traindoc", "probe", "--json", "--log", str(log), env=env)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["traindoc_bundle"] == 1
    assert [r["probe"] for r in data["results"]] == list(PROBES)
    by_probe = {r["probe"]: r for r in data["results"]}
    assert by_probe["env_vars"]["evidence"]["variables"]["NCCL_SOCKET_IFNAME"] == "ens9zz"
    assert "NCCL_IFNAME_MISSING" in [f["code"] for f in by_probe["env_vars"]["findings"]]
    assert "TORCH_HUB_TOKEN" in by_probe["env_vars"]["evidence"]["variables"], "captured, then masked"
    assert "train.py" in json.dumps(by_probe["processes"]), "the token-bearing process was seen"
    assert secret not in result.stdout + result.stderr


def test_bundle_round_trips_into_ask(tmp_path, secret_env):
    """A bundle made by `traindoc probe --json` is accepted by `ask --bundle` unchanged."""
    secret, env, log = secret_env
    made = run("traindoc", "probe", "--json", env=env)
    assert made.returncode == 0, made.stderr
    path = tmp_path / "here.json"
    path.write_text(made.stdout, encoding="utf-8")
    answer = run("ask", "--json", "--bundle", str(path), "NCCL hangs at init")
    assert answer.returncode == 0, answer.stderr
    assert "NCCL_IFNAME_MISSING" in [f["code"] for f in answer.json()["findings"]]
    assert secret not in answer.stdout + answer.stderr


def node(torch: str, ifname: str, interfaces: list[str]) -> list[ProbeResult]:
    return [
        ProbeResult("env_vars", Status.OK, "", (), {"variables": {"NCCL_SOCKET_IFNAME": ifname},
                                                    "interfaces": interfaces}),
        ProbeResult("versions", Status.OK, "", (), {"python": "3.11.7", "packages": {"torch": torch},
                                                    "torch_cuda": "12.8", "nccl": "2.26.2"}),
    ]


@pytest.fixture
def two_nodes(tmp_path: Path) -> tuple[Path, Path]:
    a = write_bundle(tmp_path / "a.json", node("2.7.0+cu128", "eth0", ["eth0", "lo"]))
    b = write_bundle(tmp_path / "b.json", node("2.6.0+cu126", "ens5", ["eth0", "lo"]))
    return a, b


def test_compare_json_reports_differences(two_nodes):
    a, b = two_nodes
    result = run("traindoc", "probe", "--compare", str(a), str(b), "--json")
    assert result.returncode == 0, result.stderr
    findings = {f["code"]: f for f in json.loads(result.stdout)}
    assert {"NODES_DIFFER_TORCH", "NODE_IFNAME_MISSING"} <= set(findings)
    assert "NODES_DIFFER_NCCL_VARIABLES" in findings
    assert "2.7.0+cu128" in findings["NODES_DIFFER_TORCH"]["evidence"]
    assert "2.6.0+cu126" in findings["NODES_DIFFER_TORCH"]["evidence"]
    assert "ens5" in findings["NODE_IFNAME_MISSING"]["summary"] and str(b) in findings["NODE_IFNAME_MISSING"]["summary"]
    assert "NODES_DIFFER_PYTHON" not in findings


def test_compare_table(two_nodes):
    a, b = two_nodes
    result = run("traindoc", "probe", "--compare", str(a), str(b))
    assert result.returncode == 0, result.stderr
    flat = " ".join(result.stdout.split())
    assert "NODES_DIFFER_TORCH" in flat and "NODE_IFNAME_MISSING" in flat


def test_compare_identical_nodes(two_nodes, tmp_path):
    a, _ = two_nodes
    copy = tmp_path / "a2.json"
    copy.write_text(a.read_text(), encoding="utf-8")
    result = run("traindoc", "probe", "--compare", str(a), str(copy), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def test_compare_needs_two_bundles(two_nodes):
    a, _ = two_nodes
    result = run("traindoc", "probe", "--compare", str(a))
    assert_one_line_error(result, "traindoc", code=2)
    assert "two" in result.stderr


@pytest.mark.parametrize("content", ["just text\n", '{"hello": 1}', None], ids=["text", "json", "missing"])
def test_compare_rejects_non_bundle(two_nodes, tmp_path, content):
    a, _ = two_nodes
    other = tmp_path / "other.json"
    if content is not None:
        other.write_text(content, encoding="utf-8")
    result = run("traindoc", "probe", "--compare", str(a), str(other))
    assert_one_line_error(result, "traindoc", code=1)
    assert str(other) in result.stderr


def test_probe_bad_timeout_is_usage_error():
    result = run("traindoc", "probe", "--timeout", "0")
    assert_one_line_error(result, "traindoc", code=2)
