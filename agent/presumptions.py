"""Sections whose presumption about the machine the evidence contradicts are not the answer.

A document section can be written for one kind of machine (seed 000's CUDA-compatibility write-up for a Blackwell
GPU). What each section presumes, and how a question, a job's logs or the probes show the machine's GPU, is data
(``agent/data/presumptions.json``). When the evidence names the GPU's architecture and none of it is what a
section presumes, the section leaves the citations: its fixes would be wrong for this machine.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

from agent.answer import Citation


@dataclass(frozen=True)
class Presumption:
    file: str
    heading: str
    gpu_arch: frozenset[str]


@cache
def _table() -> tuple[tuple[Presumption, ...], tuple[tuple[re.Pattern[str], str], ...]]:
    data = json.loads(resources.files("agent").joinpath("data/presumptions.json").read_text(encoding="utf-8"))
    sections = tuple(Presumption(row["file"], row["heading"], frozenset(row["presumes"].get("gpu_arch", ())))
                     for row in data["sections"])
    evidence = tuple((re.compile(row["pattern"]), row["arch"]) for row in data["gpu_arch_evidence"])
    return sections, evidence


def gpu_archs(texts: Iterable[str]) -> set[str]:
    """The GPU architectures (sm_XY) the evidence shows: a capability, a warning naming it, a GPU's name."""
    found: set[str] = set()
    _, patterns = _table()
    for text in texts:
        for line in text.splitlines()[:5000]:
            line = line[:2048]  # the linear-time rule: no line longer than the secrets cut is matched
            for pattern, arch in patterns:
                for match in pattern.finditer(line):
                    found.add(match.expand(arch))
    return found


TORCH_VERSION = re.compile(
    r"PyTorch version:\s*(?P<a>\d+\.\d+[\w.+]*)|torch version\s*\.*\s*(?P<b>\d+\.\d+[\w.+]*)"
    r"|\btorch[ =]=?\s?(?P<c>\d+\.\d+\.\d+[\w.+]*)"
)


def torch_version(texts: Iterable[str]) -> str | None:
    """The user's torch where the evidence prints it (collect_env, a probe of the job's interpreter, a log)."""
    for text in texts:
        for line in text.splitlines()[:5000]:
            match = TORCH_VERSION.search(line[:2048])
            if match:
                return match.group("a") or match.group("b") or match.group("c")
    return None


def presumed(citation: Citation) -> frozenset[str]:
    """The GPU architectures a cited section is written for (empty: it presumes none)."""
    sections, _ = _table()
    name = citation.source.rsplit("/", 1)[-1]
    return frozenset().union(*(p.gpu_arch for p in sections if p.file == name and p.heading in citation.section))


def contradicted(citations: Sequence[Citation], archs: set[str]) -> list[Citation]:
    """The citations whose presumed GPU the evidence (``archs``) contradicts."""
    if not archs:
        return []
    return [c for c in citations if (wanted := presumed(c)) and not (wanted & archs)]


def ruled_out_sections(citations: Sequence[Citation], facts: Sequence[str]) -> list[Citation]:
    """The citations recorded about failure kinds (corpus/data/section_kinds.json) every one of which a fact of the
    setup the asker states rules out (registry: ruled_out_by): a CUDA wheel's section for a job on an Ascend NPU.
    Under a binding fact (another accelerator or framework) also the built-in sections recorded about no kind: they
    are written for PyTorch on NVIDIA GPUs too. A team's section (not recorded) is never judged."""
    if not facts:
        return []
    from agent.stated import binding_facts
    from corpus.kinds import about_no_kind, section_kinds
    from runbooks.registry import ruled_out

    binding = bool(set(facts) & binding_facts())

    def excluded(citation: Citation) -> bool:
        if binding and about_no_kind(citation.source, citation.section):
            return True
        kinds = section_kinds(citation.source, citation.section).kinds
        return bool(kinds) and all(ruled_out(kind, facts) is not None for kind in kinds)

    return [c for c in citations if excluded(c)]


__all__ = ["contradicted", "gpu_archs", "presumed", "ruled_out_sections"]
