"""How a Slack answer names its sources: links where the corpus records an upstream, readable titles otherwise."""

from __future__ import annotations

import re
from pathlib import Path

from agent.answer import Citation
from common.redaction import Redactor
from traindoc_slack.sources import source_line

HASH_NAME = re.compile(r"\d{3}_[0-9a-f]{16}\.txt")
LINK = re.compile(r"<(https?://[^|>]+)\|([^>]+)>")


def line(source: str, section: str, title: str = "", **extra: object) -> str:
    return source_line(Citation(n=1, source=source, section=section, chunk_id="c", score=1.0, title=title, **extra),
                       Redactor().redact)


def test_a_seed_links_to_the_upstream_snapshot_and_says_upstream_moved_on() -> None:
    shown = line("corpus/004_f7d4acab9feaf887.txt", "故障排除指南 > 显存问题 > 问题：显存溢出 (Out of Memory, OOM) 错误",
                 "Problem: GPU Memory Overflow (Out of Memory, OOM) Errors", lang="en")
    url, label = LINK.search(shown).groups()
    # the permalink of the commit the shipped copy was taken at (advice/data/projects.json)
    assert url == "https://github.com/opendilab/LightRFT/blob/8c876fd/docs/source/best_practice/troubleshooting_zh.md"
    assert label.startswith("Problem: GPU Memory Overflow")
    assert "snapshot at 8c876fd; upstream has changed since" in shown and "en rendering" in shown
    assert not HASH_NAME.search(shown)


def test_a_seed_without_a_recorded_upstream_gets_a_readable_title() -> None:
    shown = line("corpus/002_8a84ca4f82c44780.txt", "DeepSpeed卡住问题解决方案 > 常见错误及解决方案 > 错误3: GPU内存不足")
    assert shown == "[1] *错误3: GPU内存不足 — DeepSpeed卡住问题解决方案*"


def test_a_runbook_is_named_by_its_title_with_its_upstream_sources() -> None:
    shown = line("corpus/runbooks/en/cuda_oom.md", "CUDA out of memory (torch.OutOfMemoryError)")
    assert shown.startswith("[1] *CUDA out of memory (torch.OutOfMemoryError)*")
    assert re.search(r"traindoc runbook, checked \d{4}-\d{2}-\d{2}", shown)
    refs = LINK.findall(shown)
    assert 1 <= len(refs) <= 2 and all(url.startswith("https://") for url, _ in refs)


def test_a_team_document_links_to_the_upstream_its_front_matter_names(tmp_path: Path) -> None:
    doc = tmp_path / "oom.md"
    doc.write_text("---\ntitle: Our OOM runbook\nupstream: https://wiki.example.org/ml/oom\n---\n# OOM\n\n## Fix\n", encoding="utf-8")
    shown = line(str(doc), "OOM > Fix", "Fix")
    assert LINK.search(shown).groups() == ("https://wiki.example.org/ml/oom", "Fix — OOM")


def test_a_hostile_front_matter_makes_no_link_and_no_mention(tmp_path: Path) -> None:
    doc = tmp_path / "bad.md"
    doc.write_text('---\ntitle: "<!channel>"\nupstream: "https://a.example/x|<!channel>"\n---\n# <!here> x\n', encoding="utf-8")
    shown = line(str(doc), "<!here> x")
    assert "<" not in shown.replace("&lt;", "") and "<!" not in shown


def test_a_chinese_asker_reads_the_notes_on_a_source_in_chinese() -> None:
    cited = Citation(n=1, source="corpus/004_f7d4acab9feaf887.txt", chunk_id="c", score=1.0,
                     section="故障排除指南 > 显存问题 > 问题：显存溢出 (Out of Memory, OOM) 错误")
    shown = source_line(cited, Redactor().redact, "zh")
    assert "快照版本 8c876fd；上游此后已有更新" in shown and "snapshot" not in shown
    runbook = source_line(Citation(n=2, source="corpus/runbooks/zh/cuda_oom.md", section="CUDA 显存不足", chunk_id="r",
                                   score=1.0), Redactor().redact, "zh")
    assert re.search(r"traindoc 运行手册，核对于 \d{4}-\d{2}-\d{2}", runbook) and "出处：<https://" in runbook
