"""advice.review on the seeds' own sections and on a team's document: a wrong, stale or harmful command never stays
in copyable code (its corrected form or nothing does), the original is quoted with the reason and a source, a
misleading one keeps its caveat, names upstream does not know are flagged, deprecated ones are shown with their
replacement for the user's torch, and a project's own advice says whose it is."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from clikit import ROOT

from advice.claims import claims
from advice.names import env_findings, flag_findings, key_findings
from advice.review import NOTE_PREFIX, review
from common.settings import Settings
from corpus.indexer import document_chunks

FENCED = re.compile(r"```[^\n]*\n(.*?)```", re.S)


def _code(text: str) -> str:
    return "\n".join(FENCED.findall(text))


def _sections(needle: str) -> list:
    paths = sorted((ROOT / "corpus").glob("00*.txt")) + sorted((ROOT / "corpus" / "renderings" / "en").glob("*.md"))
    return [c for c in document_chunks(paths, Settings()) if needle in c.text]


@pytest.mark.parametrize("needle", ["NCCL_TIMEOUT=1800", "NCCL_BACKEND=gloo", "pkill -f", "xargs kill",
                                    "NCCL_SOCKET_IFNAME=lo", "NCCL_BLOCKING_WAIT=1"])
def test_wrong_or_harmful_commands_of_the_seeds_never_stay_in_code(needle: str) -> None:
    sections = _sections(needle)
    assert sections, f"no seed section shows {needle}: the test lost its subject"
    for chunk in sections:
        for lang in ("en", "zh"):
            shown = review(chunk.text, chunk.source, chunk.section, lang)
            assert needle not in _code(shown.text), (chunk.section, shown.text[:2000])
            notes = [line for line in shown.text.splitlines() if needle in line]
            assert notes and all("traindoc" in line for line in notes), notes  # quoted, marked, never bare
            assert any(f.kind == "claim" and f.sources for f in shown.flags), shown.flags


def test_a_misleading_command_stays_with_its_caveat() -> None:
    chunk = next(c for c in _sections("DS_SKIP_CUDA_CHECK=1") if c.source.endswith(".txt"))
    shown = review(chunk.text, chunk.source, chunk.section, "en")
    assert "DS_SKIP_CUDA_CHECK=1" in _code(shown.text)
    caveat = [line for line in shown.text.splitlines() if line.startswith(NOTE_PREFIX) and "DS_SKIP_CUDA_CHECK" in line]
    assert caveat and "misleading" in caveat[0], shown.text


def test_every_claim_names_a_source_and_both_languages() -> None:
    for claim in claims():
        assert claim.reason.get("en") and claim.reason.get("zh"), claim.id
        assert claim.sources or claim.verdict == "unverifiable", claim.id


TEAM_RUNBOOK = """# Our cluster's NCCL notes

## Slow all-reduce on the new nodes

```bash
export NCCL_FAST_RING_MODE=1
export TORCH_NCCL_TRACE_BUFFER_SIZE=2000
export NCCL_DEBUG=INFO
```

Our DeepSpeed config:

```json
{
  "train_micro_batch_size_per_gpus": 4,
  "gradient_accumulation_steps": 8,
  "zero_optimization": {"stage": 3}
}
```
"""


def test_a_team_document_gets_the_same_checks() -> None:
    shown = review(TEAM_RUNBOOK, "docs/team/nccl.md", "Our cluster's NCCL notes > Slow all-reduce", "en",
                   torch_version="2.13.0")
    flagged = {(f.id, f.verdict) for f in shown.flags if f.kind == "name"}
    assert ("NCCL_FAST_RING_MODE", "unknown") in flagged, flagged  # invented: NCCL reads no such variable
    assert ("TORCH_NCCL_TRACE_BUFFER_SIZE", "deprecated") in flagged, flagged
    assert ("train_micro_batch_size_per_gpus", "unknown") in flagged, flagged  # a typo of DeepSpeed's key
    assert not {name for name, _ in flagged} & {"NCCL_DEBUG", "gradient_accumulation_steps", "zero_optimization", "stage"}
    code = _code(shown.text)
    assert "TORCH_FR_BUFFER_SIZE=2000" in code and "TORCH_NCCL_TRACE_BUFFER_SIZE" not in code, code  # for torch 2.13
    assert "your torch 2.13.0" in shown.text


def test_a_deprecated_name_is_kept_for_a_torch_that_predates_its_replacement() -> None:
    shown = review(TEAM_RUNBOOK, "docs/team/nccl.md", "notes", "en", torch_version="2.1.0")
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE=2000" in _code(shown.text)
    assert "still the name in your torch 2.1.0" in shown.text


def test_names_are_found_only_where_they_are_variables_flags_or_keys() -> None:
    assert [f.name for f in env_findings("see CUDA_ERROR_SYSTEM_NOT_READY in the log")] == []
    assert [f.status for f in env_findings("export NCCL_TIMEOUT=1800")] in (["not_read"], ["unknown"])
    assert [f.name for f in flag_findings("torchrun --nproc-per-node=2 --nnodes 1 train.py --epochs 3")] == \
        ["--nproc-per-node", "--nnodes"]  # --epochs is the script's own
    assert {f.status for f in flag_findings("torchrun --nproc-per-node=2 --nnodes 1 train.py")} == {"known"}
    assert [f.status for f in flag_findings("torchrun --num-gpus 2 train.py")] == ["unknown"]
    assert not list(key_findings('{"model": "llama", "epochs": 3}'))  # not a DeepSpeed config


def test_an_install_that_could_replace_torch_is_constrained_for_the_users_torch() -> None:
    text = "Upgrade vLLM:\n\n```bash\npip install -U vllm\n```\n"
    shown = review(text, "docs/team/vllm.md", "vLLM", "en", torch_version="2.6.0+cu124")
    assert "torch==2.6.0" in _code(shown.text) or "pip freeze" in _code(shown.text), shown.text
    unknown = review(text, "docs/team/vllm.md", "vLLM", "en")
    assert "torch" in unknown.text.split("```")[-1], unknown.text  # no version known: a warning says what to add


def test_a_projects_section_says_whose_advice_it_is() -> None:
    chunk = next(c for c in _sections("--micro_rollout_batch_size") if c.source.endswith(".txt"))
    shown = review(chunk.text, chunk.source, chunk.section, "en")
    assert shown.project == "LightRFT" and any("LightRFT" in note for note in shown.notes), shown.notes
    assert any(f.verdict == "project" for f in shown.flags), shown.flags


def test_the_shipped_rendering_gets_the_same_corrections_as_its_original() -> None:
    for needle in ("NCCL_TIMEOUT=1800",):
        for chunk in _sections(needle):
            assert needle not in _code(review(chunk.text, chunk.source, chunk.section, "en").text)
    assert Path(ROOT / "corpus" / "renderings" / "en").is_dir()


def test_a_projects_flags_are_a_fix_only_for_that_projects_users() -> None:
    from agent.answer import Citation
    from agent.compose import compose
    from agent.core import reviewed

    chunk = next(c for c in _sections("--micro_rollout_batch_size 4") if c.source.endswith(".txt"))
    cited = reviewed(Citation(1, chunk.source, chunk.section, chunk.chunk_id, 1.0, chunk.text), "en", [])
    other = compose("CUDA out of memory with DeepSpeed ZeRO-3 in my own training script", [cited], [], False, [], [])
    own = compose("LightRFT runs out of memory during rollout", [cited], [], False, [], [])
    assert "--micro_rollout_batch_size" not in other.split("### Fixes", 1)[-1], other
    assert "--micro_rollout_batch_size" in own.split("### Fixes", 1)[-1], own
    assert "Written for LightRFT" in other and "Written for LightRFT" in own


def test_a_line_that_already_warns_is_not_marked_and_a_pipe_is_another_programs() -> None:
    warned = "- Do not `export NCCL_TIMEOUT=1800`: nothing reads it."
    assert review(warned, "docs/team/x.md", "s", "en").text == warned
    assert [f.name for f in flag_findings("NCCL_DEBUG=INFO torchrun <args> 2>&1 | grep -E 'Bootstrap'")] == []
