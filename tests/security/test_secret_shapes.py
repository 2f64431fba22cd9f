"""Every secret shape, on every path that leaves the machine: one row of ``common.secrets.SHAPES`` at a
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
    from ui.slack_blocks import answer_blocks

    fallback, blocks = answer_blocks(_answer(shape), "a1", probes_button=True)
    assert shape.planted not in fallback + json.dumps(blocks)


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_the_web_chat_never_shows_a_secret(shape: Shape) -> None:
    from ui.web import shown, sources_html

    answer = _answer(shape)
    assert shape.planted not in shown(answer.answer) + shown(answer.question) + sources_html(answer)


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_the_feedback_store_never_keeps_a_secret(shape: Shape, tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "feedback.sqlite3")
    store.record(_answer(shape), 1, "web")
    assert shape.planted not in json.dumps(list(store.rows()))


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_a_log_line_on_stderr_never_carries_a_secret(shape: Shape, capsys: pytest.CaptureFixture[str]) -> None:
    from ui.quiet import setup_logging

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
