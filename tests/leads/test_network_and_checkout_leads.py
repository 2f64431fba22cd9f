"""Two kinds of report the lead decision reads from what the failure printed (issue 37's hub-access and own-package
runbooks), run as a user runs them: `ask --json` over the real shared index.

- urllib3's own connection messages under a download from the Hub (``Connection to huggingface.co timed out``, and
  ``Network is unreachable`` where the report says the Hub cannot be reached) lead with the hub-access runbook; the
  same ``Network is unreachable`` with nothing about the Hub does not (NCCL's sockets print it too).
- ``No module named X`` raised by a file inside a checkout's folder named X is the project's own package not
  importable, even where a published package bears its name; the same from an installed copy is not.
"""

from __future__ import annotations

from typing import Any

import pytest
from clikit import ask_json as ask
from clikit import lead_kind as _lead

from agent.exceptions import recognise

pytestmark = pytest.mark.usefixtures("use_shared_index")




def test_urllib3_timing_out_on_the_hub_leads_with_hub_access(cli: Any) -> None:
    answer = ask(cli, "loading the tokenizer fails on the cluster:\nurllib3.exceptions.ConnectTimeoutError: "
                 "(<urllib3.connection.HTTPSConnection object at 0x7f3a2c1d0>, 'Connection to huggingface.co timed "
                 "out. (connect timeout=10)')")
    assert _lead(answer) == "hf_hub_access" and answer["lead"]["rule"] == "quoted"
    assert "HF_ENDPOINT" in answer["answer"] or "HF_HUB_OFFLINE" in answer["answer"]


def test_an_unreachable_network_is_the_hub_only_where_the_report_says_the_hub(cli: Any) -> None:
    frames = ('  File "/opt/env/lib/python3.10/site-packages/urllib3/util/connection.py", line 73, in '
              'create_connection\n    sock.connect(sa)\nOSError: [Errno 101] Network is unreachable')
    hub = ask(cli, "下载模型时报错，服务器无法直接连接到 huggingface：\n" + frames)
    assert _lead(hub) == "hf_hub_access" and hub["language"] == "zh"
    bare = ask(cli, "my job fails at start:\n" + frames)
    assert _lead(bare) != "hf_hub_access"


def test_a_checkout_s_own_package_missing_is_the_own_package_runbook(cli: Any) -> None:
    traceback = ('Traceback (most recent call last):\n'
                 '  File "/home/me/LLaMA-Factory/src/llamafactory/launcher.py", line 15, in <module>\n'
                 '    from llamafactory.train.tuner import run_exp\n'
                 "ModuleNotFoundError: No module named 'llamafactory'\n"
                 'E0822 16:10:35.525161 139625595627328 torch/distributed/elastic/multiprocessing/api.py:833] '
                 'failed (exitcode: 1) local_rank: 0 (pid: 1754335) of binary: /usr/bin/python')
    answer = ask(cli, "训练出错\n" + traceback)
    assert _lead(answer) == "own_package_import" and answer["lead"]["rule"] == "own_module"


@pytest.mark.parametrize(("frame", "own"), [
    ("/home/me/LLaMA-Factory/src/llamafactory/launcher.py", True),  # the checkout's own code runs
    ("C:\\work\\LLaMA-Factory\\src\\llamafactory\\cli.py", True),  # a Windows checkout
    ("/opt/env/lib/python3.10/site-packages/llamafactory/launcher.py", False),  # an installed copy
    ("/home/me/project/train.py", False),  # no folder of that name: a published package not installed
])
def test_the_frame_that_raised_tells_a_checkout_from_an_installation(frame: str, own: bool) -> None:
    raised = recognise([f'  File "{frame}", line 15, in <module>', "    from llamafactory.train.tuner import run_exp",
                        "ModuleNotFoundError: No module named 'llamafactory'"])
    assert raised is not None and (raised.own_kind == "own_package_import") is own


@pytest.mark.parametrize(("report", "kind"), [
    # several consumer GPUs hang where DeepSpeed starts: its initialize broadcasts the parameters, their first collective
    ("Training with multiple 4090 GPUs always gets stuck at deepspeed.initialize, no error is printed; a single 4090 "
     "runs fine.", "consumer_gpu_p2p"),
    ("4090 多卡训练，deepspeed 初始化时卡住不动，没有任何报错", "consumer_gpu_p2p"),
    # Chinese counts GPUs with a measure word ("两卡", "双卡", "四块"): still several of them
    ("我的 4090 两卡训练卡在第一个 all_reduce，一直不动", "consumer_gpu_p2p"),
    ("双卡3090 跑 DDP，初始化之后就卡住了", "consumer_gpu_p2p"),
    # one GPU needs no P2P: the DeepSpeed start-up runbook
    ("On my single RTX 4090 the job gets stuck at deepspeed.initialize and never prints anything.", "deepspeed_init_hang"),
    # data-centre GPUs: the stage named decides
    ("On 8 A100s the job hangs at deepspeed.initialize forever.", "deepspeed_init_hang"),
])
def test_a_hang_on_several_consumer_gpus_is_their_p2p_first(cli: Any, report: str, kind: str) -> None:
    assert _lead(ask(cli, report)) == kind


def test_a_key_missing_where_a_data_set_s_example_is_read_is_the_data_set_s_format(cli: Any) -> None:
    traceback = ('训练时报错：\n  File "proj/scripts/finetune.py", line 70, in __getitem__\n'
                 "    return json.loads(self.data[index]['json_dialogue'])\nKeyError: 'json_dialogue'")
    answer = ask(cli, traceback)
    assert _lead(answer) == "chat_template_format" and answer["lead"]["rule"] == "named_thing"
    elsewhere = ask(cli, '  File "proj/config.py", line 12, in load_config\n    return cfg["json_dialogue"]\n'
                         "KeyError: 'json_dialogue'")
    assert _lead(elsewhere) is None  # a key missing from a config is no data set's format


def test_a_report_that_shows_its_kind_leads_past_a_section_about_no_kind(cli: Any) -> None:
    """A broad tuning section recorded about no kind stops a runbook that only reads alike; a runbook whose kind the
    report shows (slow training's "very slow", "GPU utilization is very low") still leads past it."""
    answer = ask(cli, "Training is very slow. I noticed that the GPU utilization is very low and the data loading "
                      "seems to take most of each step; 8 A100s, batch size 16.")
    assert _lead(answer) == "slow_training"


def test_an_error_line_given_first_is_placed_where_the_paste_shows_it() -> None:
    """Callers give the error lines first, then the whole paste: the frames read are those above the line's place in
    the paste (the file that raised it), not the error lines above it."""
    paste = ['  File "/home/me/LLaMA-Factory/src/llamafactory/launcher.py", line 15, in <module>',
             "    from llamafactory.train.tuner import run_exp", "ModuleNotFoundError: No module named 'llamafactory'"]
    raised = recognise([paste[-1], *paste])
    assert raised is not None and raised.own_kind == "own_package_import"
    assert raised.place == "/home/me/LLaMA-Factory/src/llamafactory/launcher.py:15"
