"""Every secret shape, on every path that leaves the machine: one row of ``common.secret_shapes.SHAPES`` at a
time, planted in a question, a log line, an environment value, a bundle, a Slack message, the web chat,
the feedback store and a log record."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from agent.answer import Answer, Citation, FindingView
from agent.feedback import FeedbackStore
from common.redaction import Redactor
from common.secrets import LINE_CAP, PRIVATE_SHAPES, SHAPES, Shape, mask
from tools.base import ProbeContext
from tools.redact import mask_json, mask_text, mask_value
from tools.registry import run_probes
from tools.report import load_bundle

IDS = [f"{s.kind}-{i}" for i, s in enumerate(SHAPES)]


def planted(shape: Shape) -> str:
    return f"RuntimeError: NCCL watchdog timeout; {shape.example} (rank 3)"


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_the_redactor_masks_each_shape_before_a_model_and_gives_it_back(shape: Shape) -> None:
    redactor = Redactor()
    sent = redactor.redact(planted(shape))
    assert shape.planted not in sent
    assert f"[{shape.kind}_1]" in sent
    assert redactor.restore(sent) == planted(shape)


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_probe_masking_masks_each_shape(shape: Shape) -> None:
    assert shape.planted not in mask_text(planted(shape))
    assert shape.planted not in mask_value(planted(shape), "NCCL_DEBUG_SUBSYS")


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_an_environment_value_never_shows_a_secret(shape: Shape) -> None:
    """env_vars reports NCCL_*/MASTER_* values: a token pasted into one is masked in the evidence and findings."""
    environ = {"NCCL_SOCKET_IFNAME": f"eth9,{shape.example}", "MASTER_ADDR": shape.example, "WORLD_SIZE": "1"}
    (result,) = run_probes(["env_vars"], ProbeContext(environ=environ, timeout_s=5))
    assert "NCCL_IFNAME_MISSING" in {f.code for f in result.findings}
    assert shape.planted not in json.dumps(result.to_dict())


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_a_bundle_never_carries_a_secret(shape: Shape, tmp_path: Path) -> None:
    """On write (bundle()) and on read: a bundle edited by hand with a secret in it is masked when loaded."""
    data = {"traindoc_bundle": 1, "host": "n1", "results": [
        {"probe": "env_vars", "status": "ok", "summary": planted(shape), "findings": [],
         "evidence": {"variables": {"NCCL_DEBUG": planted(shape)}, "interfaces": ["eth0"], "gpu_count": 1}}]}
    assert shape.planted not in json.dumps(mask_json(data))
    path = tmp_path / "node.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert shape.planted not in json.dumps([r.to_dict() for r in load_bundle(path)])


def _answer(shape: Shape) -> Answer:
    text = planted(shape)
    return Answer(question=text, answer=f"### Likely cause\n{text}\n\n```\n{text}\n```", no_match=False,
                  citations=[Citation(1, "corpus/x.md", f"NCCL › {text}", "c1", 1.0, text=text)],
                  findings=[FindingView("env_vars", "problem", "NCCL_IFNAME_MISSING", text, text, fix=text)],
                  notice=text)


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_a_slack_message_never_carries_a_secret(shape: Shape) -> None:
    from traindoc_slack.blocks import answer_blocks

    fallback, blocks = answer_blocks(_answer(shape), "a1", probes_button=True)
    assert shape.planted not in fallback + json.dumps(blocks)


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_the_web_chat_never_shows_a_secret(shape: Shape) -> None:
    from traindoc_web.chat import shown, sources_html

    answer = _answer(shape)
    assert shape.planted not in shown(answer.answer) + shown(answer.question) + sources_html(answer)


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_the_feedback_store_never_keeps_a_secret(shape: Shape, tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "feedback.sqlite3")
    store.record(_answer(shape), 1, "web")
    assert shape.planted not in json.dumps(list(store.rows()))


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_a_log_line_on_stderr_never_carries_a_secret(shape: Shape, capsys: pytest.CaptureFixture[str]) -> None:
    from traindoc_cli.quiet import setup_logging

    root = logging.getLogger()
    saved = list(root.handlers), root.level
    try:
        setup_logging(debug=False)
        logging.getLogger("traindoc.slack").error("slack: answering failed: %s", planted(shape))
    finally:
        root.handlers[:], _ = saved[0], root.setLevel(saved[1])
    err = capsys.readouterr().err
    assert "answering failed" in err and shape.planted not in err


@pytest.mark.parametrize("shape", PRIVATE_SHAPES, ids=[s.kind for s in PRIVATE_SHAPES])
def test_strict_mode_masks_where_a_job_ran(shape: Shape) -> None:
    sent = Redactor(mode="strict").redact(f"checkpoint on {shape.example}/ckpt")
    assert shape.planted not in sent and Redactor().redact(f"on {shape.example}") == f"on {shape.example}"


@pytest.mark.parametrize("text", [
    "max_new_tokens=4096000", "TOKENIZERS_PARALLELISM=falsey", "the token passed validation", "sha 0123456789abcdef0123",
    "Error: token expired", "keyboard=us-intl-layout", "torch 2.7.0+cu128 on sm_120",
])
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert mask(text) == text


def test_the_one_table_names_its_reference_and_example() -> None:
    for shape in SHAPES:
        assert shape.reference and shape.example and shape.planted in shape.example, shape.kind
        assert len(shape.example.splitlines()[0]) < LINE_CAP


# The shapes issue 27 found passing, each as it was written: (text, what must not be seen again).
ISSUE_27 = [
    ("REDIS_URL=redis://:Zq8vR2kL5mN7@cache:6379/0", "Zq8vR2kL5mN7"),
    ("celery broker amqp://:Zq8vR2kL5mN7@rabbit//", "Zq8vR2kL5mN7"),
    ("machine h login u password Zq8vR2kL5mN7", "Zq8vR2kL5mN7"),
    ("machine api.example.com password Zq8vR2kL5mN7 login u", "Zq8vR2kL5mN7"),
    ("DB_PASS=Zq8vR2kL5mN7", "Zq8vR2kL5mN7"),
    ("export MYSQL_PWD=Zq8vR2kL5mN7", "Zq8vR2kL5mN7"),
    ("GET https://b.s3.amazonaws.com/c.pt?X-Amz-Credential=x&X-Amz-Signature=4f2a9c7d1e6b8a3c5f0e2d4b6a8c0e1f3a5b7c9d",
     "4f2a9c7d1e6b8a3c5f0e2d4b6a8c0e1f3a5b7c9d"),
    ("?X-Amz-Security-Token=IQoJb3JpZ2luX2VjEHoaCXVzLWVhc3QtMSJHMEUCIQ", "IQoJb3JpZ2luX2VjEHoaCXVzLWVhc3QtMSJHMEUCIQ"),
    ("https://storage.googleapis.com/b/o?X-Goog-Signature=9a8b7c6d5e4f3a2b1c0d", "9a8b7c6d5e4f3a2b1c0d"),
    ("https://acct.blob.core.windows.net/c/x?sp=r&sig=Zq8vR2kL5mN7pT1xW4yB6cD9%3D", "Zq8vR2kL5mN7pT1xW4yB6cD9%3D"),
    ("curl -u alice:Zq8vR2kL5mN7 https://x", "Zq8vR2kL5mN7"),
    ("curl --user 'alice:Zq8v R2kL5mN7' https://x", "Zq8v R2kL5mN7"),
    ("sshpass -p Zq8vR2kL5mN7 ssh node1", "Zq8vR2kL5mN7"),
    ("echo ok && docker login -u bob -p Zq8vR2kL5mN7 nvcr.io", "Zq8vR2kL5mN7"),
    ("Cookie: sessionid=Zq8vR2kL5mN7; csrftoken=abc", "Zq8vR2kL5mN7"),
    ("< Set-Cookie: _gitlab_session=Zq8vR2kL5mN7pT1x; path=/", "Zq8vR2kL5mN7pT1x"),
    ("    client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQo=", "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQo="),
    ("    token: Zq8vR2kL5mN7pT1xW4yB", "Zq8vR2kL5mN7pT1xW4yB"),
    ('DB_PASSWORD="correct horse battery staple"', "horse battery staple"),
    ("export PGPASSWORD='my pass word'", "pass word"),
    ('{"password": "two words"}', "two words"),
    ('--password "Zq8v R2kL"', "R2kL"),
]


@pytest.mark.parametrize("text, secret", ISSUE_27, ids=[t[:40] for t, _ in ISSUE_27])
def test_each_shape_the_sweep_found_is_masked(text: str, secret: str) -> None:
    assert secret not in mask(text)
    redactor = Redactor()
    sent = redactor.redact(text)
    assert secret not in sent and redactor.restore(sent) == text
    assert secret not in json.dumps(mask_json({"line": text}))


def test_a_private_key_below_a_begin_line_longer_than_the_cut_is_masked() -> None:
    body = ["MIIEowIBAAKCAQEA" + "q8vR2kL5mN7pT1xW4yB6cD9fG3hJ0sA2eU5Zq8vR2kL5mN7"[:48]] + ["Zq8vR2kL5mN7pT1xW4yB6cD9fG3hJ0sA2eU5" * 2] * 3
    text = "x" * (LINE_CAP + 500) + " -----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(body) + "\n-----END RSA PRIVATE KEY-----\nstep 2"
    for out in (mask(text), Redactor().redact(text), Redactor(mode="strict").redact(text)):
        assert not any(line in out for line in body) and "Zq8vR2kL5mN7pT1x" not in out
        assert out.endswith("\nstep 2")


def test_a_private_key_body_without_its_begin_line_is_masked() -> None:
    lines = ["MIIEowIBAAKCAQEA" + "q" * 48] + ["Zq8vR2kL5mN7pT1xW4yB6cD9fG3hJ0sA2eU5"[:32] * 2] * 3 + ["ZmFrZQ=="]
    text = "[rank0]: (cut)\n" + "\n".join(lines) + "\n-----END RSA PRIVATE KEY-----"
    assert not any(line in mask(text) for line in lines[1:])


def test_a_private_key_with_no_end_masks_its_base64_and_keeps_what_follows() -> None:
    text = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\nAAAAZq8vR2kL5mN7\n\nNCCL WARN socket closed"
    out = mask(text)
    assert "Zq8vR2kL5mN7" not in out and out.endswith("NCCL WARN socket closed")


@pytest.mark.parametrize("name", ["DB_PASS", "MYSQL_PWD", "REDIS_PASSWORD", "SESSION_COOKIE", "NPM_CONFIG__AUTH"])
def test_environment_variables_named_for_a_password_are_masked_whole(name: str) -> None:
    assert mask_value("Zq8v R2kL5mN7", name) == "***"


@pytest.mark.parametrize("text", [
    "docker run -u 1000:1000 -p 8080:80 img", "mysql -p training_db", "python -u train.py --pass-rate 0.9",
    "curl -u $USER:$TOKEN https://x", "docker login --password-stdin -u bob nvcr.io", "unzip -p weights.zip",
    "PWD=/workspace", "default login node is busy", "Cookie: ***",
])
def test_command_lines_without_a_password_are_left_alone(text: str) -> None:
    assert mask(text) == text
