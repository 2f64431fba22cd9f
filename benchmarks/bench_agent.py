"""Agent and explain overhead: what the LLM paths cost per question beyond the model itself, against the offline path.

What is timed, in-process, on the built-in corpus (indexed into a temp dir at the start):
- offline: ``Troubleshooter.ask(Question(q, probes=False))`` with the default offline backend;
- agent: the same call with ``backend=openai`` and the real langchain-openai client against the fake
  OpenAI-compatible server (tests/fakes/openai_server.py) answering instantly: one streamed
  ``search_docs`` tool call, then a streamed answer citing the first section it was shown. So the agent
  does the same retrieval as the offline path plus two chat round trips over HTTP, the langgraph loop,
  redaction and grounding;
- explain: ``llm_mode=explain`` against the same server playing a model without tool calling: traindoc
  gathers the facts as the offline path does (same retrieval), numbers and masks them, one streamed chat
  round trip whose answer cites the first fact, then grounding.
The time the server spent inside its handlers is subtracted from each path's wall time: what is left is
that path's own overhead. Each of 10 questions (English and Chinese) runs ``--runs`` times after one
untimed warm-up question per path (imports, index load). Printed ratios: overhead / offline time.
Target (ours): median overhead under 500 ms per question for each, well below a real model's latency.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

from _common import finish, parser, verdict  # noqa: E402

TARGET_OVERHEAD_MS = 500.0
QUESTIONS = [
    "NCCL watchdog timeout after 1800000 ms",
    "CUDA out of memory with DeepSpeed ZeRO-3",
    "RuntimeError: CUDA error: no kernel image is available for execution on the device",
    "DeepSpeed ZeRO-3 hangs at initialization",
    "address already in use MASTER_PORT 29500",
    "loss becomes NaN after a few hundred steps with fp16",
    "vLLM KV cache out of memory when loading the model",
    "训练时 NCCL 超时怎么办",
    "显存不足 CUDA out of memory",
    "checkpoint 加载失败 size mismatch",
]


def main() -> int:
    p = parser(__doc__.splitlines()[0], runs=3)
    args = p.parse_args()

    from fakes.openai_server import FakeOpenAI, calls, cite_facts, echo

    from agent.core import Question, build_troubleshooter
    from common.settings import Settings

    with (tempfile.TemporaryDirectory(prefix="bench-agent-") as tmp, FakeOpenAI() as server,
          FakeOpenAI(tool_calling=False) as plain):
        base = replace(Settings.from_env({}), data_dir=Path(tmp))
        print("indexing the built-in corpus ...", flush=True)
        offline = build_troubleshooter(base)
        offline.index(progress=False)
        agent = build_troubleshooter(replace(base, backend="openai", llm_base_url=server.url, llm_model="fake-model",
                                             llm_mode="agent"))
        explainer = build_troubleshooter(replace(base, backend="openai", llm_base_url=plain.url, llm_model="fake-model",
                                                 llm_mode="explain"))

        def ask_offline(q: str) -> float:
            started = time.perf_counter()
            offline.ask(Question(q, probes=False))
            return (time.perf_counter() - started) * 1000

        def ask_agent(q: str) -> tuple[float, float]:
            server.script.extend([calls(("search_docs", {"query": q})), echo("Likely cause [doc:{doc}].")])
            busy, started = server.busy_s, time.perf_counter()
            answer = agent.ask(Question(q, probes=False))
            wall = (time.perf_counter() - started) * 1000
            if answer.notice or not answer.grounded:
                raise SystemExit(f"the agent did not answer {q!r}: {answer.notice or 'ungrounded'}")
            return wall, (server.busy_s - busy) * 1000

        def ask_explain(q: str) -> tuple[float, float]:
            plain.script.append(cite_facts("Likely cause [{doc}]."))
            busy, started = plain.busy_s, time.perf_counter()
            answer = explainer.ask(Question(q, probes=False))
            wall = (time.perf_counter() - started) * 1000
            if answer.notice or not answer.grounded or answer.mode != "explain":
                raise SystemExit(f"explain mode did not answer {q!r}: {answer.notice or 'ungrounded'}")
            return wall, (plain.busy_s - busy) * 1000

        ask_offline(QUESTIONS[0])
        ask_agent(QUESTIONS[0])
        ask_explain(QUESTIONS[0])
        rows = []
        for q in QUESTIONS:
            off = [ask_offline(q) for _ in range(args.runs)]
            runs = [ask_agent(q) for _ in range(args.runs)]
            explained = [ask_explain(q) for _ in range(args.runs)]
            rows.append((q, statistics.median(off), statistics.median(w - s for w, s in runs),
                         statistics.median(w - s for w, s in explained), statistics.median(s for _, s in runs),
                         statistics.median(s for _, s in explained)))

    print(f"{'question':44} {'offline':>9} {'agent':>9} {'explain':>9}   (overhead: wall minus server time)")
    for q, off, agent_over, explain_over, _, _ in rows:
        print(f"{q[:44]:44} {off:7.1f}ms {agent_over:7.1f}ms {explain_over:7.1f}ms "
              f"{agent_over / off:5.1f}x {explain_over / off:5.1f}x")
    off_med = statistics.median(r[1] for r in rows)
    agent_med = statistics.median(r[2] for r in rows)
    explain_med = statistics.median(r[3] for r in rows)
    print(f"median: offline {off_med:.1f} ms; agent overhead {agent_med:.1f} ms (server {statistics.median(r[4] for r in rows):.1f} ms, "
          f"2 round trips); explain overhead {explain_med:.1f} ms (server {statistics.median(r[5] for r in rows):.1f} ms, 1 round trip)")
    print(f"ratio overhead / offline: agent {agent_med / off_med:.1f}x, explain {explain_med / off_med:.1f}x")
    oks = [agent_med < TARGET_OVERHEAD_MS, explain_med < TARGET_OVERHEAD_MS]
    verdict("agent overhead per question", oks[0], f"{agent_med:.0f} ms vs target < {TARGET_OVERHEAD_MS:.0f} ms "
                                                   f"({agent_med / off_med:.1f}x the offline path)")
    verdict("explain overhead per question", oks[1], f"{explain_med:.0f} ms vs target < {TARGET_OVERHEAD_MS:.0f} ms "
                                                     f"({explain_med / off_med:.1f}x the offline path)")
    return finish(args.strict, oks)


if __name__ == "__main__":
    sys.exit(main())
