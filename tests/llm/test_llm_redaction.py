"""Secrets never reach the model (question, --log file, a probed environment variable), and the user sees
their own values where the model echoed a placeholder. Strict mode masks hosts, IPs and home paths too."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from fakes.openai_server import FakeOpenAI, calls, echo

from common.redaction import Redactor


def planted(tag: str) -> list[tuple[str, str]]:
    """(text to plant, the secret part that must not leak), one of each kind, unique to ``tag``."""
    h = hashlib.sha1(tag.encode()).hexdigest()
    pem_body = f"MIIEowIBAAKCAQEA{tag}{h}"
    password = f"p4ss{tag}{h[:6]}"
    rows = [
        f"hf_{tag}{h}"[:34],
        f"sk-proj-{tag}{h}",
        f"sk-ant-api03-{tag}{h}",
        f"xoxb-1234567890-{tag}{h[:20]}",
        f"ghp_{tag}{h}"[:40],
        f"glpat-{tag}{h[:20]}",
        f"AKIA{(tag + h).upper()[:16]}",
    ]
    return [(row, row) for row in rows] + [
        (f"https://deploy:{password}@registry.example.com/v2", password),
        (f"-----BEGIN RSA PRIVATE KEY-----\n{pem_body}\n-----END RSA PRIVATE KEY-----", pem_body),
        (f"WANDB_API_KEY={h}", h),
    ]


def test_no_planted_secret_reaches_the_model_and_the_user_gets_them_back(ask_cli: Any, tmp_path: Path) -> None:
    one_line = [(text, secret) for text, secret in planted("log") + planted("env") if "\n" not in text]
    in_question, in_log, in_env = planted("question"), one_line[:9], one_line[9:]  # the PEM only in the question
    log = tmp_path / "train.log"
    log.write_text("step 1 loss 2.3\n" + "".join(f"RuntimeError: NCCL watchdog timeout; {text}\n"
                                                for text, _ in in_log), encoding="utf-8")
    question = "NCCL watchdog timeout. My setup:\n" + "\n".join(text for text, _ in in_question)
    # env_vars reports a socket interface that does not exist, with the variable's raw value
    env = {"NCCL_SOCKET_IFNAME": ",".join(["eth9", *(t for t, _ in in_env[:5])]),
           "GLOO_SOCKET_IFNAME": ",".join(["eth9", *(t for t, _ in in_env[5:])])}
    script = [calls(("env_vars", {}), ("log_grep", {"path": str(log)}), ("search_docs", {"query": "NCCL timeout"})),
              echo("Your values were masked: {placeholders} [doc:{doc}]")]
    with FakeOpenAI(script) as server:
        result = ask_cli(server.url, "--json", "--log", str(log), question, **env)

    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    data = json.loads(result.stdout)
    assert "notice" not in data, data["notice"]
    received = server.all_text_received()
    leaked = [secret for _, secret in in_question + in_log + in_env if secret in received]
    assert leaked == []
    # the three channels really were exercised
    assert "NCCL_IFNAME_MISSING" in received and "GLOO_SOCKET_IFNAME" in received
    steps = {s["tool"]: s["result"] for s in data["steps"]}  # the three ran concurrently, in any order
    assert sorted(steps) == ["env_vars", "log_grep", "search_docs"]
    assert "REFUSED" not in steps["log_grep"] and "NCCL watchdog timeout;" in received
    for kind in ("HF_TOKEN", "OPENAI_KEY", "ANTHROPIC_KEY", "SLACK_TOKEN", "GITHUB_TOKEN", "GITLAB_TOKEN",
                 "AWS_ACCESS_KEY", "URL_PASSWORD", "PRIVATE_KEY", "SECRET"):
        assert f"[{kind}_1]" in received, kind
    # the model echoed the placeholders: the user sees their own values
    assert [s for _, s in in_question + in_log if s not in data["answer"]] == [], data["answer"]


def test_strict_redaction_masks_hosts_ips_and_home_paths(ask_cli: Any) -> None:
    question = "NCCL timeout between gpu-node-17.cluster.internal and 10.12.0.7, checkpoints in /home/alice/ckpt"
    with FakeOpenAI([echo("Check {placeholders}.")]) as server:
        strict = ask_cli(server.url, "--json", "--no-probes", "--redact", "strict", question)
    received = server.all_text_received()

    assert strict.returncode == 0, strict.stderr
    for private in ("gpu-node-17", "cluster.internal", "10.12.0.7", "alice"):
        assert private not in received
    assert "[HOST_1]" in received and "[IP_1]" in received and "[HOME_1]" in received
    answer = json.loads(strict.stdout)["answer"]
    assert "gpu-node-17.cluster.internal" in answer and "10.12.0.7" in answer and "/home/alice" in answer


# -- the Redactor itself ---------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "secret"), planted("unit"))
def test_each_kind_of_secret_is_masked_and_restored(text: str, secret: str) -> None:
    redactor = Redactor()
    masked = redactor.redact(f"before {text} after")
    assert secret not in masked and masked.startswith("before ") and masked.endswith(" after")
    assert redactor.restore(masked) == f"before {text} after"
    assert redactor.redact(masked) == masked  # placeholders are not masked again


def test_the_same_secret_gets_the_same_placeholder() -> None:
    redactor = Redactor()
    token = planted("same")[0][0]
    first, second = redactor.redact(f"a {token}"), redactor.redact(f"b {token} and {planted('other')[0][0]}")
    assert first == "a [HF_TOKEN_1]" and second == "b [HF_TOKEN_1] and [HF_TOKEN_2]"
    assert redactor.restore("[HF_TOKEN_2] [HF_TOKEN_9]") == f"{planted('other')[0][0]} [HF_TOKEN_9]"


@pytest.mark.parametrize("private", ["gpu-node-17.cluster.internal", "dgx03", "10.12.0.7", "/home/alice", "/root"])
def test_strict_masks_hosts_ips_and_home_paths_and_default_does_not(private: str) -> None:
    text = f"seen at {private}/x today"
    assert private not in Redactor(mode="strict").redact(text)
    assert Redactor().redact(text) == text
    strict = Redactor(mode="strict")
    assert strict.restore(strict.redact(text)) == text


def test_ordinary_training_text_is_left_alone() -> None:
    text = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB; NCCL_DEBUG=INFO; MASTER_PORT=29500"
    assert Redactor().redact(text) == text
