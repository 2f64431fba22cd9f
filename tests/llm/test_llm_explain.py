"""Explain mode: traindoc gathers the facts, the model (no tool calling) writes the answer from them, numbered.

Everything here goes through the real langchain-openai client against the fake OpenAI-compatible server."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from fakes.openai_server import FakeOpenAI, Status, calls, cite_facts, closed_port, text
from test_llm_redaction import planted

from agent.core import Question
from agent.events import Notice, Token
from agent.logs import read_logs
from common.language import say

NCCL = "NCCL watchdog timeout after 1800000 ms, what should I do?"
WARNING = "cites no retrieved section or probe result"


def user_message(request: dict[str, Any]) -> str:
    return str([m for m in request["messages"] if m["role"] == "user"][-1]["content"])


def model_said(answer: str) -> str:
    """The model's own words: an explained answer whose kind `traindoc check` confirms ends with that check."""
    return answer.split(f"\n\n### {say('confirm_heading', 'en')}\n", 1)[0]


def capabilities() -> dict[str, Any]:
    return json.loads(Path(os.environ["TRAINDOC_LLM_CAPABILITIES"]).read_text())


def test_auto_measures_once_then_explains_and_grounds(ask_cli: Any) -> None:
    script = [calls(("ping", {"text": "ok"})), cite_facts("The watchdog fired: raise the timeout [{doc}]. Also [42].")]
    with FakeOpenAI(script, tool_calling=False) as server:
        result = ask_cli(server.url, "--json", "--no-probes", NCCL, TRAINDOC_LLM_MODE="auto")
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
        ping, request = server.requests
        server.script.append(cite_facts("Raise the timeout [{doc}]."))
        again = ask_cli(server.url, "--no-probes", NCCL, TRAINDOC_LLM_MODE="auto")

    data = json.loads(result.stdout)
    assert ping["tools"] and "tools" not in request and request["stream"] is True
    sent = user_message(request)
    assert "[1] Document section: " in sent and say("model_language", "en") in sent
    assert data["mode"] == "explain" and data["backend"] == "openai:fake-model" and "notice" not in data
    assert model_said(data["answer"]) == "The watchdog fired: raise the timeout [1]. Also.", "[42] was never given: dropped"
    assert data["answer"].endswith("confirm: `traindoc check nccl` now, and again after the fix")  # issue 41: its check
    assert data["grounded"] is True
    given = [int(n) for n in __import__("re").findall(r"(?m)^\[(\d+)\] Document section", sent)]
    assert [c["n"] for c in data["citations"]] == given, "the citation list is the sections the model was given"
    assert data["steps"][0]["tool"] == "search_docs"
    assert set(data) >= {"question", "answer", "citations", "findings", "no_match", "timings_ms", "diagnosis", "steps"}
    assert [c["source"] for c in capabilities().values()] == ["the first question"]
    # the verdict is cached: the second question costs no capability check, and streams to the terminal
    assert again.returncode == 0, again.stderr
    assert len(server.requests) == 3 and "tools" not in server.requests[2]
    assert "Raise the timeout [1]." in again.stdout and "→ search_docs(" in again.stdout and "Sources" in again.stdout


def test_no_planted_secret_reaches_the_model_in_explain_mode(ask_cli: Any, tmp_path: Path) -> None:
    one_line = [(t, s) for t, s in planted("xlog") + planted("xenv") if "\n" not in t]
    in_question, in_log, in_env = planted("xquestion"), one_line[:9], one_line[9:]
    log = tmp_path / "train.log"
    log.write_text("step 1 loss 2.3\n" + "".join(f"RuntimeError: NCCL watchdog timeout; {t}\n" for t, _ in in_log),
                   encoding="utf-8")
    question = "NCCL watchdog timeout. My setup:\n" + "\n".join(t for t, _ in in_question)
    env = {"NCCL_SOCKET_IFNAME": ",".join(["eth9", *(t for t, _ in in_env[:5])]),
           "GLOO_SOCKET_IFNAME": ",".join(["eth9", *(t for t, _ in in_env[5:])])}
    with FakeOpenAI([cite_facts("Masked: {placeholders} [{doc}] [{probe}]")], tool_calling=False) as server:
        result = ask_cli(server.url, "--json", "--mode", "explain", "--log", str(log), question, **env)

    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    data = json.loads(result.stdout)
    assert data["mode"] == "explain" and "notice" not in data, data.get("notice")
    (request,) = server.requests
    received = server.all_text_received()
    assert [s for _, s in in_question + in_log + in_env if s in received] == []
    assert "NCCL_IFNAME_MISSING" in received and "NCCL watchdog timeout;" in received  # all three channels went
    for kind in ("HF_TOKEN", "OPENAI_KEY", "SLACK_TOKEN", "AWS_ACCESS_KEY", "URL_PASSWORD", "PRIVATE_KEY", "SECRET"):
        assert f"[{kind}_1]" in received, kind
    assert [s for _, s in in_question + in_log if s not in data["answer"]] == [], "the user sees their own values"
    assert any("NCCL_IFNAME_MISSING" == f["code"] and f["related"] for f in data["findings"])


def test_a_citation_of_a_fact_not_given_is_dropped_and_none_means_ungrounded(agent_ask: Any) -> None:
    with FakeOpenAI([cite_facts("Cause [{doc}]; see [77], [doc:feedfacefeedface] and [1, 99]."),
                     text("Probably a driver bug [12].")], tool_calling=False) as server:
        cited, _ = agent_ask(NCCL, llm_base_url=server.url, llm_mode="explain")
        uncited, _ = agent_ask(NCCL, llm_base_url=server.url, llm_mode="explain")

    assert model_said(cited.answer) == "Cause [1]; see, and [1]." and cited.grounded is True
    assert uncited.grounded is False and WARNING in uncited.answer and "[12]" not in uncited.answer
    assert uncited.citations and uncited.citations == cited.citations, "the sections the model was given"


def test_an_english_question_over_chinese_sections_asks_for_english_and_a_chinese_one_for_chinese(agent_ask: Any) -> None:
    with FakeOpenAI([cite_facts("Use cu128 [{doc}]."), cite_facts("请安装 cu128 版本 [{doc}]。")],
                    tool_calling=False) as server:
        english, events = agent_ask("sm_120 is not compatible with the current PyTorch install",
                                    llm_base_url=server.url, llm_mode="explain")
        chinese, _ = agent_ask("RTX 5090 报错 sm_120 不兼容，怎么办", llm_base_url=server.url, llm_mode="explain")
        to_en, to_zh = (user_message(r) for r in server.requests)

    assert say("model_language", "en") in to_en and say("model_language", "zh") in to_zh
    assert any("\u4e00" <= ch <= "\u9fff" for ch in to_en.split("Facts", 1)[1]), "the sections are Chinese"
    assert "cu128" in to_en and "Curated correction" in to_en, "stale advice is corrected before the model sees it"
    assert english.answer == "Use cu128 [1]." and chinese.answer == "请安装 cu128 版本 [1]。"
    assert "".join(e.text for e in events if isinstance(e, Token)) == "Use cu128 [1].", "the tokens streamed"


def test_the_job_diagnosis_is_a_fact_and_stays_traindocs_own(agent_ask: Any, tmp_path: Path) -> None:
    from test_llm_job_tools import LOG

    log = tmp_path / "job.log"
    log.write_text(LOG)
    reading = read_logs([log], question="why did it die")
    question = Question("why did it die", log_errors=reading.errors, job=reading.diagnosis, probes=False)
    with FakeOpenAI([cite_facts("Rank 1 raised KeyError in collate [{job}]; rank 0 only timed out.")],
                    tool_calling=False) as server:
        answer, _ = agent_ask(question, llm_base_url=server.url, llm_mode="explain")

    sent = user_message(server.requests[0])
    assert "Job diagnosis, from the attached logs" in sent and "root cause: exception; rank: 1" in sent
    assert "hf_abcdefghijklmnopqrstuvwxyz0123" not in server.all_text_received()
    n = int(sent.split("] Job diagnosis", 1)[0].rsplit("[", 1)[1])
    assert answer.answer == f"Rank 1 raised KeyError in collate [{n}]; rank 0 only timed out." and answer.grounded
    assert answer.diagnosis is reading.diagnosis
    (job,) = [f for f in answer.findings if f.probe == "job_triage"]
    assert job.code == "ROOT_CAUSE_EXCEPTION" and job.related == [n]


def test_auto_explains_when_the_agent_answers_without_a_tool(agent_ask: Any) -> None:
    script = [calls(("ping", {"text": "ok"})), text("Just reinstall the driver."), cite_facts("Raise it [{doc}].")]
    with FakeOpenAI(script) as server:
        answer, events = agent_ask(NCCL, llm_base_url=server.url, llm_mode="auto")

    notice = "model openai:fake-model answered without calling a tool; answered in explain mode, from the facts traindoc gathered"
    assert answer.notice == notice and [e.text for e in events if isinstance(e, Notice)] == [notice]
    assert answer.mode == "explain" and model_said(answer.answer) == "Raise it [1]." and answer.grounded
    assert [c["tool_calls"] for c in capabilities().values()] == [False]


def test_auto_explains_after_an_empty_agent_answer(agent_ask: Any) -> None:
    with FakeOpenAI([calls(("ping", {"text": "ok"})), text(""), cite_facts("Raise it [{doc}].")]) as server:
        answer, _ = agent_ask(NCCL, llm_base_url=server.url, llm_mode="auto")

    assert answer.mode == "explain" and model_said(answer.answer) == "Raise it [1]."
    assert answer.notice is not None and answer.notice.startswith("model openai:fake-model returned an empty answer; ")


def test_a_failing_model_falls_back_to_the_offline_answer_in_the_questions_language(agent_ask: Any) -> None:
    answer, events = agent_ask("训练时 NCCL 超时怎么办", llm_base_url=closed_port(), llm_mode="explain")

    assert answer.backend == "offline" and answer.mode is None and _detail(answer.answer).startswith("### 可能原因：")
    assert answer.notice is not None and answer.notice.startswith("模型 openai:fake-model 无法连接：")
    assert answer.notice.endswith("；改为显示离线答案")
    english, _ = agent_ask(NCCL, llm_base_url=closed_port(), llm_mode="auto")
    assert english.notice is not None and english.notice.startswith("model openai:fake-model unreachable: ")


def test_a_context_overflow_is_learned_and_the_facts_shrink(agent_ask: Any) -> None:
    small = Status(400, {"error": {"message": "This model's maximum context length is 1024 tokens. However, you requested "
                                          "3100 tokens (2600 in the messages, 500 in the completion).",
                                  "type": "invalid_request_error", "code": "context_length_exceeded"}})  # llama.cpp
    with FakeOpenAI([small, cite_facts("Raise it [{doc}].")], tool_calling=False) as server:
        answer, _ = agent_ask(NCCL, llm_base_url=server.url, llm_mode="explain")
        first, second = (user_message(r) for r in server.requests)

    assert model_said(answer.answer) == "Raise it [1]." and answer.notice is None
    assert len(second) < len(first)
    assert [c["context_tokens"] for c in capabilities().values()] == [1024]


def test_nothing_to_explain_means_no_model_call(agent_ask: Any, warm_retriever: Any, monkeypatch: Any) -> None:
    search = warm_retriever.search
    monkeypatch.setattr(warm_retriever, "search", lambda *a, **k: replace(search(*a, **k), no_match=True))
    with FakeOpenAI(tool_calling=False) as server:
        answer, _ = agent_ask("怎么烤面包？面包烤焦了怎么办", llm_base_url=server.url, llm_mode="explain")

    assert server.requests == [] and answer.no_match and answer.answer.startswith("### 结论") and "\n**没有匹配**：" in answer.answer
    assert answer.notice == say("nothing_to_explain", "zh")


def test_a_base_model_that_repeats_its_prompt_gets_the_offline_answer(agent_ask: Any) -> None:
    """What gemma-3-270m (a base model, no chat template) does on llama.cpp's server: it continues the prompt."""
    def parrot(body: dict[str, Any]) -> Any:
        return text(user_message(body) + "\nQuestion:\nNCCL timeout")

    with FakeOpenAI([parrot], tool_calling=False) as server:
        answer, _ = agent_ask(NCCL, llm_base_url=server.url, llm_mode="explain")

    assert len(server.requests) == 1 and answer.backend == "offline" and _detail(answer.answer).startswith("### Likely cause")
    assert answer.notice == ("model openai:fake-model repeated its prompt instead of answering (a base model, not an "
                             "instruction-tuned chat model?); showing the offline answer")


def _detail(body: str) -> str:
    """An offline answer after its verdict block (agent.summary), which every offline answer leads with."""
    assert body.startswith(("### Answer\n", "### 结论\n")), body[:200]
    return body[body.index("\n### ") + 1:]
