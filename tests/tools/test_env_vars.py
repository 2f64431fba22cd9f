import pytest

from tools import env_vars
from tools.base import ProbeContext, Status
from tools.redact import mask_environ, mask_text, mask_value

NICS = ["eth0", "ib0", "lo", "docker0"]


def run(environ, gpus=4):
    return env_vars.probe(ProbeContext(environ=environ), gpu_count=lambda ctx: gpus, interfaces=lambda: NICS)


def problems(result):
    return sorted(f.code for f in result.findings if f.severity == "problem")


@pytest.mark.parametrize(
    ("environ", "gpus", "expected"),
    [
        ({"NCCL_SOCKET_IFNAME": "ens5"}, 4, ["NCCL_IFNAME_MISSING"]),
        ({"NCCL_SOCKET_IFNAME": "eth"}, 4, []),  # prefix match, as NCCL does
        ({"NCCL_SOCKET_IFNAME": "=eth"}, 4, ["NCCL_IFNAME_MISSING"]),  # "=" means exact
        ({"NCCL_SOCKET_IFNAME": "ens5,ib"}, 4, []),
        ({"NCCL_SOCKET_IFNAME": "^lo,docker"}, 4, []),
        ({"NCCL_SOCKET_IFNAME": "^eth,ib,lo,docker"}, 4, ["NCCL_IFNAME_MISSING"]),
        ({"GLOO_SOCKET_IFNAME": "bond0"}, 4, ["NCCL_IFNAME_MISSING"]),
        ({"WORLD_SIZE": "8"}, 4, ["WORLD_SIZE_EXCEEDS_GPUS"]),
        ({"WORLD_SIZE": "8", "NNODES": "2"}, 4, []),
        ({"WORLD_SIZE": "8", "MASTER_ADDR": "10.0.0.1"}, 4, []),
        ({"WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4"}, 4, []),
        ({"WORLD_SIZE": "8"}, None, []),  # GPU count unknown: skip
        ({"WORLD_SIZE": "4"}, 4, []),
        ({"CUDA_VISIBLE_DEVICES": "0,1,4"}, 4, ["CUDA_VISIBLE_DEVICES_INVALID"]),
        ({"CUDA_VISIBLE_DEVICES": "0,3"}, 4, []),
        ({"CUDA_VISIBLE_DEVICES": ""}, 4, ["CUDA_VISIBLE_DEVICES_EMPTY"]),
        ({"CUDA_VISIBLE_DEVICES": "GPU-1234,MIG-5678"}, 4, []),
    ],
)
def test_rows(environ, gpus, expected):
    result = run(environ, gpus)
    assert problems(result) == expected
    assert result.status == (Status.PROBLEM if expected else Status.OK)


def test_info_findings_and_interfaces_in_evidence():
    result = run({"NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1"})
    assert {f.code for f in result.findings} == {"NCCL_P2P_DISABLED", "NCCL_IB_DISABLED", "NCCL_DEBUG_UNSET"}
    assert result.evidence["interfaces"] == NICS
    assert "NCCL_DEBUG_UNSET" not in {f.code for f in run({"NCCL_DEBUG": "INFO"}).findings}


def test_secrets_masked_and_irrelevant_vars_left_out():
    result = run({"TORCH_HUB_TOKEN": "abc123", "NCCL_DEBUG": "INFO", "HOME": "/root",
                  "MASTER_ADDR": "hf_abcdefghijklmnopqrstuvwx", "HF_TOKEN": "hf_zzz"})
    variables = result.evidence["variables"]
    assert variables["TORCH_HUB_TOKEN"] == "***"
    assert variables["MASTER_ADDR"] == "***"
    assert variables["NCCL_DEBUG"] == "INFO"
    assert "HOME" not in variables and "HF_TOKEN" not in variables
    assert "abc123" not in repr(result)


@pytest.mark.parametrize(
    ("text", "leaked"),
    [
        ("--hf_token hf_abcdefghijklmnopqrstuvwxyz", "hf_abc"),
        ("--api-key=sk-proj-abcdefghijklmnop1234", "sk-proj"),
        ("SLACK=xoxb-1234567890-abcdef", "xoxb-"),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123", "ghp_"),
        ("WANDB_API_KEY=0123abcd", "0123abcd"),
        ("https://user:pa55@example.com/x", "pa55"),
    ],
)
def test_mask_text(text, leaked):
    assert leaked not in mask_text(text)


def test_mask_environ_and_value():
    masked = mask_environ({"AWS_SECRET_ACCESS_KEY": "x", "PATH": "/bin"})
    assert masked == {"AWS_SECRET_ACCESS_KEY": "***", "PATH": "/bin"}
    assert mask_value("plain") == "plain"
