"""``--redact strict`` (``TRAINDOC_REDACT=strict``): where a job ran is masked too. IPv6 addresses, every host
under a public suffix (two-part ones such as ``co.uk`` included; the list is shipped as data and never fetched),
cloud-internal and cluster names; and files, code and versions stay as they are."""

from __future__ import annotations

import socket

import pytest

from common import hostnames
from common.redaction import Redactor


def strict(text: str) -> str:
    return Redactor(mode="strict").redact(text)


@pytest.mark.parametrize("text, hidden", [
    ("NCCL WARN connect to fe80::1ff:fe23:4567:890a%eth0 failed", "fe80::1ff:fe23:4567:890a"),
    ("MASTER_ADDR=2001:db8:85a3::8a2e:370:7334", "2001:db8:85a3::8a2e:370:7334"),
    ("tcp://[2001:db8::7]:29500 refused", "2001:db8::7"),
    ("::ffff:10.0.0.7 dropped", "::ffff:10.0.0.7"),
    ("fetching https://s3.eu-west-2.amazonaws.com/ckpt", "s3.eu-west-2.amazonaws.com"),
    ("mirror at pypi.acme.co.uk is down", "acme.co.uk"),
    ("host gpu7.lab.example.ac.jp unreachable", "example.ac.jp"),
    ("db.example.com.au timed out", "example.com.au"),
    ("rank 3 on ip-10-0-0-1.ec2.internal died", "ip-10-0-0-1"),
    ("rank 3 on ip-10-0-0-1 died", "ip-10-0-0-1"),
    ("MASTER_ADDR=gke-train-pool-1.us-central1-a.c.proj-123.internal", "proj-123"),
    ("trainer-0.trainer.ml.svc.cluster.local:29500", "trainer-0"),
    ("rendezvous at etcd.ml.svc:2379", "etcd.ml"),
    ("node a100-17.cluster.local and nfs.corp", "a100-17"),
    ("ssh alice@login.hpc.example.de", "example.de"),
    ("https://attacker.run/x and git@gitlab.example.app:x/y", "attacker.run"),
])
def test_strict_masks_where_a_job_ran(text: str, hidden: str) -> None:
    sent = strict(text)
    assert hidden not in sent and hidden.lower() not in sent.lower(), sent
    assert Redactor().redact(text) == text  # the default mode leaves hosts alone


@pytest.mark.parametrize("text", [
    "File \"/opt/venv/lib/python3.11/site-packages/torch/distributed/run.py\", line 798",
    "python -m torch.distributed.run --nproc_per_node 8 train.py",
    "train.py:42 model.pt optimizer.pt libcudart.so.12 kernel.cu csrc/init.cc README.md run.sh",
    "torch.save(state, path); logging.info(...); self.model.to(device)",
    "torch 2.7.0+cu128, nccl 2.26.2, driver 550.54.15",
    "c10::Error std::vector a[::2] 12:34:56.789 00000000:3B:00.0 ::1",
    "deepspeed.runtime.zero.stage3 torch.utils.data.DataLoader param.data",
])
def test_strict_leaves_code_files_and_versions(text: str) -> None:
    assert strict(text) == text


def test_the_same_host_gets_the_same_placeholder_and_comes_back() -> None:
    redactor = Redactor(mode="strict")
    text = "db.example.co.uk refused; retry db.example.co.uk and 2001:db8::7"
    sent = redactor.redact(text)
    assert sent.count("[HOST_1]") == 2 and "[IP_1]" in sent
    assert redactor.restore(sent) == text


def test_two_part_suffixes_come_from_the_shipped_list() -> None:
    assert hostnames.public_suffix("db.example.co.uk".split(".")) == 2
    assert hostnames.public_suffix("x.example.com".split(".")) == 1
    assert hostnames.public_suffix("a.b.kawasaki.jp".split(".")) == 3  # *.kawasaki.jp
    assert hostnames.public_suffix("city.kawasaki.jp".split(".")) == 2  # !city.kawasaki.jp
    assert (hostnames.DATA / "public_suffix_list.dat").stat().st_size > 50_000


def test_the_suffix_list_is_never_fetched(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("strict masking tried to reach the network")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    hostnames._suffixes.cache_clear()
    assert "[HOST_1]" in strict("pypi.acme.co.uk")
