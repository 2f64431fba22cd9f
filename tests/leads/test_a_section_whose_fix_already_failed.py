"""Issue 36 point 3: a report that shows the asker already ran a section's first install command, and that it
failed (``pip install flash_attn==2.7.4.post1 --no-build-isolation`` ... 构建失败), is not answered by that section's
command again: where the report signals a runbook's kind (package_build: a flash-attn build), that runbook leads.
The command is compared as written, less case, version pins and ``_``/``-``. Real index (tests/conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest

from agent.stated import already_ran, first_install
from tests.clikit import ask_json, lead_kind

SECTION = "安装过程\n```bash\n# 先装依赖\npip install flash-attn --no-build-isolation  # 编译安装\n```\n"


@pytest.mark.parametrize(("report", "ran"), [
    ("pip install flash_attn==2.7.4.post1 --no-build-isolation 构建失败", True),
    ("I ran `PIP INSTALL flash-attn  --no-build-isolation` and the build failed", True),
    ("how do I install flash attention?", False),
    ("pip install flash-attn failed", False),  # not the command the section gives
])
def test_the_sections_first_install_is_the_one_the_report_ran(report: str, ran: bool) -> None:
    assert first_install(SECTION) == "pip install flash-attn --no-build-isolation"
    assert bool(already_ran(SECTION, report)) is ran


@pytest.mark.usefixtures("use_shared_index")
def test_a_failed_flash_attn_build_with_the_sections_command_leads_with_the_build_runbook(cli: Any) -> None:
    answer = ask_json(cli, "使用 pip install flash_attn==2.7.4.post1 --no-build-isolation 安装，构建失败，请问是什么原因\n"
                           "[截图]")
    assert lead_kind(answer) == "package_build", answer.get("lead")
