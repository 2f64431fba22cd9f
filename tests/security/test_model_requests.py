"""Every secret shape, planted at once in a question, a log and environment values, never reaches a model's request
body (a fake OpenAI-compatible server records all it is sent), and the user gets their own values back."""

from __future__ import annotations

import json
import re
from pathlib import Path

from clikit import run_cli
from fakes.openai_server import FakeOpenAI, calls, echo

from common.secrets import SHAPES


def test_no_shape_reaches_the_model_from_any_input(use_shared_index: Path, tmp_path: Path) -> None:
    one_line = [s for s in SHAPES if "\n" not in s.example]
    multi = [s for s in SHAPES if "\n" in s.example]
    log = tmp_path / "train.log"
    log.write_text("step 1 loss 2.3\n" + "".join(f"RuntimeError: NCCL watchdog timeout; {s.example}\n" for s in one_line),
                   encoding="utf-8")
    question = "NCCL watchdog timeout. My setup:\n" + "\n".join(s.example for s in SHAPES)
    env = {"TRAINDOC_BACKEND": "openai", "TRAINDOC_LLM_MODEL": "fake-model", "TRAINDOC_LLM_MODE": "agent",
           "TRAINDOC_LLM_TIMEOUT": "20", "TRAINDOC_LLM_CAPABILITIES": str(tmp_path / "caps.json"),
           "NCCL_SOCKET_IFNAME": ",".join(["eth9"] + [s.example for s in one_line[:12]]),
           "GLOO_SOCKET_IFNAME": ",".join(["eth9"] + [s.example for s in one_line[12:]])}
    script = [calls(("env_vars", {}), ("log_grep", {"path": str(log)}), ("search_docs", {"query": "NCCL timeout"})),
              echo("Your values were masked: {placeholders} [doc:{doc}]")]
    with FakeOpenAI(script) as server:
        result = run_cli("ask", "--json", "--log", str(log), question, env={"TRAINDOC_LLM_BASE_URL": server.url, **env},
                         timeout=180)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    received = server.all_text_received()
    assert "NCCL_IFNAME_MISSING" in received and "NCCL watchdog timeout;" in received  # the paths were exercised
    leaked = [shape.kind for shape in SHAPES if shape.planted in received]
    assert leaked == []
    # one placeholder per distinct secret (examples that share a secret share its placeholder)
    assert len(set(re.findall(r"\[[A-Z_]+_\d+\]", received))) >= len({s.planted for s in SHAPES}) - 2
    answer = json.loads(result.stdout)["answer"]
    assert [s.kind for s in one_line + multi if s.planted not in answer] == []  # restored for the user
