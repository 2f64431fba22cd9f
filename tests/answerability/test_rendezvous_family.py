"""torch's own rendezvous failures are a known family, so a report of one is answered by the sections on a
rendezvous that does not complete (not refused as an unknown identifier)."""

from __future__ import annotations

import json

import pytest
from clikit import CliRunner, documents, runbook_of

from corpus.families import detect


def test_every_rendezvous_failure_torch_raises_is_recognised() -> None:
    from torch.distributed.elastic.rendezvous import api

    failures = [n for n in dir(api) if n.startswith("Rendezvous") and n.endswith("Error")
                and n not in ("RendezvousError", "RendezvousGracefulExitError")]  # the base class; a clean exit
    assert len(failures) >= 4
    for name in failures:
        families = [f.name for f in detect(f"torch.distributed.elastic.rendezvous.api.{name}: ...")]
        assert "rendezvous / connection failure" in families, (name, families)


@pytest.mark.usefixtures("use_shared_index")
def test_a_rendezvous_timeout_on_one_node_is_answered(cli: CliRunner) -> None:
    result = cli("ask", "--json", "--no-probes",
                 "torchrun fails with RendezvousTimeoutError on the second machine, the first one waits")
    answer = json.loads(result.stdout)
    assert not answer["no_match"], answer.get("confidence")
    assert runbook_of(answer["citations"]) == "rendezvous", answer["citations"][:1]  # traindoc's runbook leads
    sections = [c["section"] for c in documents(answer["citations"])[:3]]  # then the documents' sections
    distributed = ("多节点训练失败", "分布式初始化进程卡住", "网络超时", "DDP (分布式)")  # ranks that cannot meet
    assert any(topic in sections[0] for topic in distributed), sections
