"""Weights & Biases failing at wandb.init or login is its own kind (runbook wandb_init_failure): each line wandb prints
for a missing API key, an unreachable server, an init or service-start timeout and the interactive login prompt
picks the runbook alone; a Hub download that fails, a local wandb.py shadowing the library and the other ranks'
watchdog timeout keep their own. The messages were read in wandb/wandb's source (v0.16.6 to main); where wandb and
transformers are installed, the settings and defaults the fixes name are checked against them."""

from __future__ import annotations

import os

import pytest
from runbook_messages import assert_a_line_per_message, assert_picks

from agent.leads import LeadEvidence, decide
from runbooks.catalog import runbooks
from runbooks.choose import for_lines
from runbooks.registry import signalled

KIND = "wandb_init_failure"

# One real-shaped line per message in the runbook's front matter (the same order), as wandb prints it.
LINES = [
    "wandb.errors.UsageError: api_key not configured (no-tty). call wandb.login(key=[your_api_key])",
    "wandb.errors.errors.UsageError: No API key configured. Use `wandb login` to log in.",
    "wandb.errors.errors.CommError: Run initialization has timed out after 90.0 sec. Please try increasing the timeout "
    "with the `init_timeout` setting: `wandb.init(settings=wandb.Settings(init_timeout=120))`.",
    "Consider increasing the init_timeout setting:",
    "wandb.sdk.service.service.ServiceStartTimeoutError: Timed out waiting for wandb service to start after 30.0 "
    "seconds. Try increasing the timeout with the `_service_wait` setting.",
    "wandb.sdk.lib.service.service_port_file.ServicePollForTokenError: Failed to read port info after 30.0 seconds "
    "(wandb-core PID=4242): /tmp/tmpa1b2c3/port-4200.txt",
    "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='api.wandb.ai', port=443): Max retries exceeded "
    "with url: /graphql (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f3a>: Failed "
    "to establish a new connection: [Errno 101] Network is unreachable'))",
    "wandb: (3) Don't visualize my results",
    "wandb: Waiting for wandb.init()...",
    "wandb: Network error (ConnectionError), entering retry loop.",
]

RANK0 = [
    "[rank0]: Traceback (most recent call last):",
    '[rank0]:   File "/work/repo/train.py", line 31, in <module>',
    '[rank0]:     run = wandb.init(project="llm-sft")',
    "[rank0]: wandb.errors.errors.CommError: Run initialization has timed out after 90.0 sec. Please try increasing "
    "the timeout with the `init_timeout` setting: `wandb.init(settings=wandb.Settings(init_timeout=120))`.",
]

NEIGHBOURS = {
    "hf_hub_access": "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): Max "
                     "retries exceeded with url: /acme/lm/resolve/main/config.json",
    "own_package_import": "AttributeError: module 'wandb' has no attribute 'init' (consider renaming "
                          "'/work/repo/wandb.py' if it has the same name as a third-party module you intended to import)",
}


def test_every_message_has_a_line_here_and_both_languages_list_the_same_ones() -> None:
    assert_a_line_per_message(KIND, LINES)


@pytest.mark.parametrize("line", LINES)
def test_each_line_wandb_prints_picks_the_runbook(line: str) -> None:
    assert_picks(KIND, [line])


def test_the_recognise_part_shows_every_message_as_printed() -> None:
    book = runbooks()[(KIND, "en")]
    assert all(message in book.parts["recognise"] for message in book.messages)


def test_rank_0_s_traceback_leads_with_the_runbook() -> None:
    lead = decide(LeadEvidence("\n".join(RANK0), None, RANK0, "en"))
    assert lead is not None and lead.kind == KIND and lead.rule == "quoted", lead


@pytest.mark.parametrize(("kind", "line"), NEIGHBOURS.items())
def test_a_neighbouring_failure_keeps_its_own_runbook(kind: str, line: str) -> None:
    chosen = for_lines([line])
    assert chosen is not None and chosen.kind == kind, (line, chosen and chosen.kind)


def test_the_signal_names_wandb_and_not_the_hub() -> None:
    assert signalled(KIND, "训练卡在 wandb.init，集群没有外网")
    assert signalled(KIND, "W&B never finishes logging in on the compute nodes")
    assert signalled(KIND, "the Hub download from huggingface.co times out on the compute nodes") is None
    # a setup that lists W&B's variables or its pin is no W&B failure: an NCCL timeout with WANDB_API_KEY=... set
    assert signalled(KIND, "NCCL watchdog timeout. My setup: WANDB_API_KEY=0123abcd, WANDB_MODE=online, wandb==0.19.0") is None


def test_transformers_5_defaults_report_to_none_and_the_check_prints_it(tmp_path) -> None:
    transformers = pytest.importorskip("transformers")
    from transformers import TrainingArguments

    default = TrainingArguments.__dataclass_fields__["report_to"].default
    assert default == ("none" if int(transformers.__version__.split(".")[0]) >= 5 else None)  # transformers PR #41375
    check = "from transformers import TrainingArguments as T; print(T(output_dir='/tmp/ta').report_to)"
    assert any(check in block for item in runbooks()[(KIND, "en")].items["checks"] for block in item.code)


def test_report_to_none_starts_no_tracker(tmp_path) -> None:
    pytest.importorskip("accelerate")  # TrainingArguments needs it to set up its devices
    from transformers import TrainingArguments

    assert TrainingArguments(output_dir=str(tmp_path), report_to="none").report_to == []


def test_the_settings_the_fixes_name_exist_in_the_installed_wandb(monkeypatch: pytest.MonkeyPatch) -> None:
    wandb = pytest.importorskip("wandb")
    settings = wandb.Settings()
    assert settings.init_timeout == 90.0 and settings.x_service_wait == 30.0
    monkeypatch.setitem(os.environ, "WANDB_INIT_TIMEOUT", "300")
    monkeypatch.setitem(os.environ, "WANDB__SERVICE_WAIT", "300")
    settings.update_from_env_vars(dict(os.environ))
    assert settings.init_timeout == 300.0 and settings.x_service_wait == 300.0
    assert wandb.Settings(mode="disabled")._noop and wandb.Settings(mode="offline")._offline


def test_no_api_key_configured_names_the_kind_only_beside_wandb() -> None:
    assert decide(LeadEvidence("openai.error: No API key configured.", None, ["No API key configured."], "en")) is None
    lead = decide(LeadEvidence(LINES[1], None, [LINES[1]], "en"))
    assert lead is not None and lead.kind == KIND


@pytest.mark.parametrize(("line", "first"), [
    (LINES[1], "give it the key without a prompt"),  # no key: the key, not offline mode
    (LINES[6], "run W&B offline"),  # no route to api.wandb.ai
    (LINES[2], "run W&B offline"),  # an init timeout: no route first, then a longer timeout
    (LINES[5], "raise the run's init timeout"),  # the service did not start: offline mode starts it too
])
def test_the_fix_written_for_the_message_shown_comes_first(line: str, first: str) -> None:
    from runbooks.render import for_this_message

    book = runbooks()[(KIND, "en")]
    fixes = for_this_message(book.items["fixes"], book.messages, [line])
    assert first in fixes[0].text, (line, fixes[0].text[:120])


@pytest.mark.parametrize("report", [
    "训练启动时卡在 wandb.init，计算节点没有外网，怎么办",
    "my training hangs at wandb.init on the cluster",
    "the job is stuck after 'wandb: Waiting for wandb.init()...' and prints nothing else",
])
def test_a_job_that_hangs_at_wandb_s_start_names_its_stage(report: str) -> None:
    from runbooks.choose import for_hang

    book = for_hang(report)
    assert book is not None and book.kind == KIND, (report, book and book.kind)


def test_once_wandb_printed_its_run_header_a_later_hang_is_not_wandb() -> None:
    from runbooks.choose import for_hang

    log = ("wandb: Tracking run with wandb version 0.19.0\nwandb: 🚀 View run at https://wandb.ai/acme/sft/runs/ab12\n"
           "the job hangs at Initializing TorchBackend in DeepSpeed with backend nccl")
    book = for_hang(log)
    assert book is not None and book.kind == "deepspeed_init_hang", book and book.kind


def test_waiting_for_wandb_init_names_the_kind_only_as_the_last_line() -> None:
    waiting = "wandb: Waiting for wandb.init()..."
    assert_picks(KIND, ["[rank0]: loading the model", waiting])
    later = [waiting, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    chosen = for_lines(later)
    assert chosen is not None and chosen.kind == "cuda_oom"
