"""The agent gets the job triage as a tool: the diagnosis (not the raw log), citable and grounded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fakes.chat_model import ScriptedChatModel, reply, tool_call

from agent.core import Question
from agent.logs import read_logs

LOG = """[default0]:step 3
[default1]:Traceback (most recent call last):
[default1]:  File "/job/train.py", line 35, in collate
[default1]:KeyError: 'target'
[default0]:RuntimeError: [../gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 10000ms for recv operation to complete
[default0]:hf_abcdefghijklmnopqrstuvwxyz0123 was in the environment
"""


def test_the_model_reads_the_triage_and_cites_it(agent_ask: Any, tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(LOG)
    reading = read_logs([log], question="why did it die")
    model = ScriptedChatModel(script=[
        reply(calls=[tool_call("job_triage")]),
        reply("Rank 1 raised KeyError: 'target' in collate [probe:job_triage]; rank 0 only timed out."),
    ])
    question = Question("why did it die", log_errors=reading.errors, job=reading.diagnosis, probes=False)
    answer, events = agent_ask(question, model)

    sent = model.all_text_sent()
    assert "root cause: exception; rank: 1" in sent and "where: train.py:35" in sent
    assert "Timed out waiting 10000ms" not in str(model.sent[0][-1].content)  # the loud line is not the lead
    assert "hf_abcdefghijklmnopqrstuvwxyz0123" not in sent
    assert answer.answer.endswith("in collate [1]; rank 0 only timed out.")
    assert answer.grounded is True
    assert answer.diagnosis is reading.diagnosis  # traindoc's own diagnosis, whatever the model wrote
    assert answer.to_json()["diagnosis"]["root_cause"]["rank"] == 1
    assert any(getattr(e, "tool", None) == "job_triage" for e in events)


def test_without_logs_the_triage_tool_is_not_offered(agent_ask: Any) -> None:
    model = ScriptedChatModel(script=[reply("Nothing to triage.")])
    agent_ask(Question("why is NCCL hanging", probes=False), model)
    offered = set(model.bound_tools[0])
    assert "job_triage" not in offered and "search_docs" in offered
