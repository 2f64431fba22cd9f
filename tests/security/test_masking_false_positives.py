"""Masking takes secrets and nothing else: the real logs under ``tests/jobs/data`` (and
``../shared/gpu-samples``) come through unchanged (a line over the cap is cut, as everywhere), and with a
real secret planted in them only that secret changes. Chunk ids, git SHAs, GPU UUIDs, NCCL comm ids, PCI bus
ids and hashes in file names are not secrets."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from common.redaction import Redactor
from common.secrets import MASK, SHAPES, clip, mask

REPO = Path(__file__).resolve().parents[2]
LOG_DIRS = [REPO / "tests" / "jobs" / "data", REPO.parent / "shared" / "gpu-samples"]


def _text_files() -> list[Path]:
    files = [p for d in LOG_DIRS if d.is_dir() for p in sorted(d.rglob("*")) if p.is_file()]
    return [p for p in files if _read(p) is not None]


def _read(path: Path) -> str | None:
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:  # a binary trace (Flight Recorder's pickle) is not a log line
        return None


LOGS = _text_files()


def test_there_are_real_logs_to_read() -> None:
    assert len(LOGS) >= 50 and any(p.suffix == ".gz" for p in LOGS)


@pytest.mark.parametrize("path", LOGS, ids=[str(p.relative_to(p.parents[2])) for p in LOGS])
def test_a_real_log_comes_through_unchanged(path: Path) -> None:
    raw = _read(path)
    assert raw is not None
    text = clip(raw)  # a line over LINE_CAP is cut, the cut shown: that is not masking
    masked = mask(raw)
    if masked != text:  # say which line changed, not just that one did
        changed = [(a, b) for a, b in zip(text.split("\n"), masked.split("\n"), strict=False) if a != b]
        assert not changed, changed[:3]
    assert Redactor().redact(raw) == masked


def test_only_the_planted_secret_changes_in_a_real_log() -> None:
    path = next(p for p in LOGS if p.suffix == ".log" and len(_read(p) or "") > 2000)
    lines = (_read(path) or "").split("\n")
    middle = len(lines) // 2
    secrets = [s for s in SHAPES if "\n" not in s.example][:40]
    planted = lines[:middle] + [f"[rank1]: {s.example}" for s in secrets] + lines[middle:]
    masked = mask("\n".join(planted)).split("\n")
    assert masked[:middle] == lines[:middle] and masked[middle + len(secrets) :] == lines[middle:]
    for line, shape in zip(masked[middle : middle + len(secrets)], secrets, strict=True):
        assert shape.planted not in line and MASK in line


@pytest.mark.parametrize("text", [
    "chunk 001_8c5ded5e8229fdf4 section 3f9a2c7d1e6b4a5c",  # chunk ids
    "commit 4b825dc642cb6eb9a060e54bf8d69288fbee4904 (HEAD -> main)",  # a git SHA
    "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-6a8f2f1b-9c3d-4e5f-a7b8-0c1d2e3f4a5b)",
    "NCCL INFO comm 0x55d8c5a0 rank 3 nranks 8 cudaDev 3 nvmlDev 3 busId 3b000 commId 0x7f1d3c5e9a2b4c6d - Init COMPLETE",
    "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.7<0>",
    "PCI bus 00000000:3B:00.0, MIG 1g.10gb, driver 550.54.15, CUDA 12.4",
    "loading /ckpt/model-00001-of-00004-5f2d8c3b9e1a.safetensors sha256="
    + "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "torch 2.7.0+cu128 nccl 2.26.2 max_new_tokens=4096 tokenizer_config.json TOKENIZERS_PARALLELISM=false",
    "docker run --gpus all -u 1000:1000 -p 29500:29500 -v /data:/data img python -u train.py",
    "mysql -p training_db; python -m torch.distributed.run --nproc_per_node 8 train.py",
    "pass 3 of 5, pass@1=0.42, bypass_cache=True, PWD=/workspace OLDPWD=/root",
    "the password is wrong; machine learning job on the default login node",
    "KeyError: 'key' in state_dict; missing key model.layers.0.mlp",
    "session started; cookie jar not used; Set-Cookie header absent",
    "X-Amz-Algorithm=AWS4-HMAC-SHA256 X-Amz-Date=20251121T000000Z",
    "expected str, got 'A3-'; SK rank 3; API-level error; EAAA",
])
def test_identifiers_that_look_random_are_not_secrets(text: str) -> None:
    assert mask(text) == text
