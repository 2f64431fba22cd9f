"""Issue 36: one registry of failure kinds, one lead decision as an ordered table, the asker's facts, generic
exceptions. Every test runs the real tables (runbooks, data/kinds.json, the phrase book): nothing is faked."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from agent.exceptions import names_agree, recognise
from agent.leads import RULES, LeadEvidence, Stop, decide
from agent.stated import Stated, read_setup
from runbooks.catalog import runbooks
from runbooks.registry import kinds, problems, signalled, unsignalled_generic

ROOT = Path(__file__).resolve().parents[2]


def test_the_registry_is_whole_every_table_names_its_kinds_and_no_message_has_two_owners() -> None:
    assert problems() == []
    assert set(kinds()) == {kind for kind, lang in runbooks() if lang == "en"}


def test_a_table_naming_a_kind_the_registry_lacks_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    import runbooks.registry as registry

    real = registry._named_by_tables
    monkeypatch.setattr(registry, "_named_by_tables", lambda: {**real(), "a table": {"no_such_kind"}})
    assert any("no_such_kind" in p for p in registry.problems())


def test_two_kinds_claiming_one_message_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    import runbooks.registry as registry

    table = dict(registry.kinds())
    port = table["port_in_use"]
    table["rendezvous"] = type(port)(**{**port.__dict__, "name": "rendezvous"})
    monkeypatch.setattr(registry, "kinds", lambda: table)
    assert any("both claim" in p for p in registry.problems())


def test_the_rules_are_one_ordered_table_strongest_evidence_first() -> None:
    assert [name for name, _ in RULES] == ["diagnosis", "quoted", "named_thing", "hang_stage", "stated", "retrieved",
                                        "section_kind", "unstaged_hang"]


def test_each_rule_alone_says_its_kind_and_why() -> None:
    rules = dict(RULES)
    ev = LeadEvidence("RuntimeError: The server socket has failed to listen on any local network address. "
                      "port: 29500, useIpv6: false, code: -98, name: EADDRINUSE", None, [], "en")
    lead = rules["quoted"](ev)
    assert lead is not None and not isinstance(lead, Stop) and lead.kind == "port_in_use" and "EADDRINUSE" in lead.because
    hang = rules["hang_stage"](LeadEvidence("my deepspeed job hangs at Initializing TorchBackend", None, [], "en"))
    assert hang is not None and not isinstance(hang, Stop) and hang.kind == "deepspeed_init_hang"
    assert rules["retrieved"](LeadEvidence("x", None, [], "en", documents=None)) is None
    assert decide(LeadEvidence("x", None, [], "en", documents=None)) is None


def test_a_likeness_leads_only_beside_the_kinds_signal() -> None:
    from agent.leads import Retrieved

    book = runbooks()[("vllm_kv_cache", "en")]
    alike = Retrieved(book.source, 0.95)
    # "vllm" alone does not tell the KV cache from another OOM in a job that uses vLLM
    assert decide(LeadEvidence("what version of vllm should we use", None, [], "en", alike, 0.9)) is None
    lead = decide(LeadEvidence("vllm fails: the KV cache does not fit", None, [], "en", alike, 0.9))
    assert lead is not None and lead.kind == "vllm_kv_cache" and lead.rule == "retrieved"


@pytest.mark.parametrize("line", [
    "ZeroDivisionError: division by zero",
    "FileNotFoundError: [Errno 2] No such file or directory: 'configs/base.yaml'",
    "ModuleNotFoundError: No module named 'flash_attn_3'",
])
def test_a_generic_head_leads_with_no_runbook(line: str) -> None:
    assert decide(LeadEvidence(line, None, [line], "en")) is None


def test_a_message_other_failures_print_too_goes_by_the_signal() -> None:
    cublas = "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( handle, opa)`"
    assert "CUBLAS_STATUS_EXECUTION_FAILED" in unsignalled_generic(cublas)
    assert decide(LeadEvidence(cublas, None, [cublas], "en")) is None
    shown = cublas + "\nRuntimeError: CUDA error: an illegal memory access was encountered (CUDA_LAUNCH_BLOCKING=1)"
    assert "CUBLAS_STATUS_EXECUTION_FAILED" not in unsignalled_generic(shown)
    assert decide(LeadEvidence(shown, None, [cublas], "en")).kind == "cuda_illegal_access"  # type: ignore[union-attr]


def test_signals_tell_neighbours_apart() -> None:
    assert signalled("dev_shm", "No space left on device while creating /dev/shm/nccl-abc")
    assert signalled("port_in_use", "the firewall drops packets between nodes") is None
    assert signalled("cuda_oom", "memory keeps growing") is None


def test_generic_exceptions_say_what_they_name_where_and_the_first_check() -> None:
    paste = ['Traceback (most recent call last):', '  File "/job/train.py", line 42, in <module>',
             "ModuleNotFoundError: No module named 'flash_attn_3'"]
    raised = recognise(paste)
    assert raised is not None and raised.thing == "flash_attn_3" and raised.place == "/job/train.py:42"
    assert "pip show flash_attn_3" in raised.check
    assert not names_agree(raised, "No module named 'lightrft'\ncd /path/to/LightRFT; pip install -e .")
    assert not names_agree(raised, "flash_attn_3 is faster on H100")  # named, but not as a missing module
    assert names_agree(raised, "ModuleNotFoundError: No module named 'flash_attn_3' -> pip install flash-attn-3")
    own = recognise(["ModuleNotFoundError: No module named 'training'"])
    assert own is not None and names_agree(own, "No module named 'lightrft': pip install -e . in the project")
    assert own.own_kind == "own_package_import" and raised.own_kind == ""
    lead = decide(LeadEvidence("ModuleNotFoundError: No module named 'training'", None, [], "en"))
    assert lead is not None and lead.kind == "own_package_import" and lead.rule == "own_module"


def test_the_asker_s_stated_values_and_setup_are_read() -> None:
    setup = read_setup(["OOM even with per_device_train_batch_size: 1 on a single node, NCCL_P2P_DISABLE=1",
                        "vllm serve m --gpu-memory-utilization 0.95"])
    assert setup.already("--per_device_train_batch_size 2 --gradient_accumulation_steps 8") is not None
    assert setup.already("vllm serve <model> --gpu-memory-utilization 0.95") is not None
    assert setup.already("llm = LLM(model=name, gpu_memory_utilization=0.5)") is None
    assert setup.already("export NCCL_P2P_DISABLE=1") is not None and setup.already("export NCCL_IB_DISABLE=1") is None
    assert setup.contradicted("torchrun --nnodes=2 --nproc-per-node=8 train.py") == "one node"
    assert read_setup(["per_device_train_batch_size: 16"]).already("--per_device_train_batch_size 2") is None


@pytest.mark.parametrize(("text", "features"), [
    ("I already use gradient checkpointing and bf16, still OOM", ("gradient checkpointing", "bf16")),
    ("已经开启了梯度检查点和bf16，还是显存不足", ("gradient checkpointing", "bf16")),
    ("gradient_checkpointing: true\nbf16: true\nper_device_train_batch_size: 4", ("gradient checkpointing", "bf16")),
    ("deepspeed train.py --bf16 --gradient_checkpointing", ("gradient checkpointing", "bf16")),
    ("I'm using flash attention 2", ("flash attention",)),
    ("should I use gradient checkpointing?", ()),  # a question whether to, not a use
    ("I'm not using gradient checkpointing", ()),
    ("without gradient checkpointing it OOMs", ()),
    ("我没有开启梯度检查点", ()),
    ("要不要开启梯度检查点？", ()),
    ("--bf16 false", ()),
])
def test_a_feature_is_in_use_only_where_the_report_says_it_is(text: str, features: tuple[str, ...]) -> None:
    from agent.stated import stated_features

    assert stated_features(text) == features


def test_a_fix_that_only_turns_on_what_the_asker_already_uses_is_already_tried() -> None:
    both = 'out = torch.utils.checkpoint.checkpoint(block, x)\nwith torch.autocast("cuda", dtype=torch.bfloat16):'
    assert read_setup(["I already use gradient checkpointing and bf16"]).already_uses(both) == (
        "gradient checkpointing", "bf16")
    assert read_setup(["I already use gradient checkpointing"]).already_uses(both) == ()  # bf16 would still be new
    assert read_setup(["I already use bf16"]).already_uses("kill <PID>") == ()


@pytest.mark.usefixtures("use_shared_index")
def test_ask_moves_the_features_the_asker_already_uses_after_the_next_fix(cli: Any) -> None:
    done = cli("ask", "--json", "--no-probes", "--full", "torch.OutOfMemoryError: CUDA out of memory. Tried to "
               "allocate 2.00 GiB. I already use gradient checkpointing and bf16")
    assert done.returncode == 0, done.stderr[-800:]
    answer = json.loads(done.stdout)
    fix = answer["verdict"]["fix"]
    assert "checkpoint" not in fix and "bfloat16" not in fix, answer["verdict"]
    assert "You already use gradient checkpointing and bf16" in answer["answer"]


@pytest.mark.parametrize(("text", "facts"), [
    ("NCCL unhandled system error on a single node in Docker", ("one node",)),
    ("单机8卡训练，NCCL 报错", ("one node",)),
    ("works on a single node but hangs with two nodes", ("the job hangs",)),  # the failing job is the other one
    ("单机没问题，多机训练就卡住", ("the job hangs",)),
    ("fine on a single GPU, OOM on 4 GPUs with DDP", ()),
    ("OOM on a single GPU (RTX 4090)", ("one GPU",)),
])
def test_a_stated_fact_is_not_stated_where_the_report_states_its_contrary(text: str, facts: tuple[str, ...]) -> None:
    from agent.stated import stated_facts

    assert stated_facts(text) == facts


def test_a_kind_the_stated_setup_rules_out_leads_only_on_its_own_message() -> None:
    """The network between nodes for a job the asker says runs on one node: not on the answering section's kind and
    a signal; its own message (what the failure printed) still leads it."""
    from dataclasses import replace

    from runbooks.registry import ruled_out

    assert ruled_out("nccl_network", ("one node",)) == "one node" and ruled_out("nccl_network", ()) is None
    section = ("corpus/002_8a84ca4f82c44780.txt", "DeepSpeed卡住问题解决方案 > 常见错误及解决方案 > 错误1: NCCL初始化失败")
    one_node = LeadEvidence("NCCL error: unhandled system error on a single node, is the nodes' firewall the cause?",
                            None, [], "en", documents=0.9, best_section=section)
    assert signalled("nccl_network", one_node.text) is not None  # the signal alone would have led it
    lead = decide(one_node)
    assert lead is None or lead.kind != "nccl_network", lead
    two_nodes = decide(replace(one_node, text="NCCL error: unhandled system error across two nodes, firewall?"))
    assert two_nodes is not None and two_nodes.kind == "nccl_network" and two_nodes.rule == "section_kind", two_nodes
    quoted = decide(replace(one_node, text="single node, yet: NCCL WARN NET/IB : Got completion from peer 10.0.0.2 "
                                           "with status=IBV_WC_RETRY_EXC_ERR(12) opcode=0 len=0 vendor err 129"))
    assert quoted is not None and (quoted.kind, quoted.rule) == ("nccl_network", "quoted"), quoted


def test_every_phrase_the_rules_say_exists_in_every_language() -> None:
    phrases = json.loads((ROOT / "common" / "data" / "phrases.json").read_text(encoding="utf-8"))
    data = json.loads((ROOT / "agent" / "data" / "exceptions.json").read_text(encoding="utf-8"))
    keys = ([f"exc_{row['name']}" for row in data["exceptions"]] + [f"lead_why_{name}" for name, _ in RULES]
            + [f"lead_basis_{name}" for name, _ in RULES if name != "diagnosis"])  # agent/summary: a lead's basis
    for lang in ("en", "zh"):
        assert not [k for k in keys if k not in phrases[lang]], lang
    for row in data["exceptions"]:
        re.compile(row["pattern"])


@pytest.mark.parametrize("word", "process parameter program timestamps jumps dumps please help about framework random "
                                 "promise remote between accept execute".split())
def test_no_signal_fires_inside_an_ordinary_word(word: str) -> None:
    """A short signal is bounded: 'RoCE' is not in 'process', 'RAM' not in 'parameter', 'mps' not in 'timestamps'."""
    assert [k.name for k in kinds().values() if k.signal_in(word)] == []


# Chinese words every report uses ("parameters", "config", "device", "driver", "compile", "inconsistent", "environment
# variable"): alone they tell no kind from its neighbours, as "parameter" or "config" alone would not in English.
@pytest.mark.parametrize("sentence", ["错误和参数如下", "我的配置如下", "设备是一台服务器", "安装了驱动", "编译了一个小模型",
                                      "结果不一致", "在新分支上", "设置了环境变量 HF_HOME"])
def test_no_signal_fires_on_an_everyday_chinese_word(sentence: str) -> None:
    assert [k.name for k in kinds().values() if k.signal_in(sentence)] == []


@pytest.mark.parametrize(("text", "facts"), [
    ("RuntimeError: HIP error: no kernel image is available for execution on the device (torch 2.5.1+rocm6.2, MI250)",
     ("not CUDA",)),
    ("[NPU] 昇腾 910 上训练，loss 变成 nan", ("not CUDA",)),
    ("PaddleDetection on an RTX 5090: The GPU compute capability in your current machine is 120", ("another framework",)),
    ("several jobs share the GPU through the CUDA MPS daemon (nvidia-cuda-mps-control)", ()),  # NVIDIA's MPS
    ("tensorflow/core/util/port.cc: oneDNN custom operations are on\nTraceback: File torch/nn/modules/module.py", ()),
])
def test_another_accelerator_or_framework_is_read_from_the_report(text: str, facts: tuple[str, ...]) -> None:
    from agent.stated import binding_facts, stated_facts

    assert stated_facts(text) == facts
    assert {"not CUDA", "another framework"} <= binding_facts()


def test_a_cuda_runbook_does_not_lead_a_job_on_another_accelerator_even_on_its_own_message() -> None:
    """ROCm prints CUDA's words ("no kernel image is available"): the PyTorch CUDA wheel's runbook is not its answer,
    although the message is the one it identifies; NCCL's own runbooks still answer a Paddle job's NCCL failure."""
    from runbooks.registry import ruled_out

    cuda = "RuntimeError: CUDA error: no kernel image is available for execution on the device"
    assert decide(LeadEvidence(cuda, None, [], "en")) is not None
    rocm = decide(LeadEvidence(cuda.replace("CUDA", "HIP") + "\nPyTorch 2.5.1 rocm6.2 wheel on an MI250", None, [], "en"))
    assert rocm is None or rocm.kind not in ("arch_mismatch", "extension_arch"), rocm
    assert ruled_out("nccl_network", ("another framework",)) is None
    assert ruled_out("cuda_oom", ("another framework",)) == "another framework"
    assert ruled_out("disk_full", ("not CUDA", "another framework")) is None


def test_a_section_about_kinds_the_setup_rules_out_is_not_an_answer() -> None:
    from agent.answer import Citation
    from agent.presumptions import ruled_out_sections

    def cite(source: str, section: str) -> Citation:
        return Citation(n=1, source=source, section=section, chunk_id="x", score=1.0, text="")

    multi = cite("corpus/004_f7d4acab9feaf887.txt", "故障排除指南 > 分布式训练问题 > 问题：多节点训练失败")
    team = cite("/team/wiki/ascend.md", "Ascend > HCCL timeouts")
    assert ruled_out_sections([multi, team], ("one node",)) == []  # rendezvous may still fail on one node
    assert ruled_out_sections([multi, team], ()) == []
    arch = cite("corpus/000_a1161a68fffab229.txt", "错误排查指南 > 错误1: CUDA兼容性问题（主要问题）")
    assert ruled_out_sections([arch, multi, team], ("not CUDA",)) == [arch]  # a team's section is never judged


def test_every_stated_fact_has_its_words_in_every_language() -> None:
    """A fix a stated fact rules out says which fact, in the asker's language (stated_contradicts)."""
    from common.language import say

    data = json.loads((ROOT / "agent" / "data" / "stated.json").read_text(encoding="utf-8"))
    for fact in (row["name"] for row in data["facts"]):
        for lang in ("en", "zh"):
            assert say(f"fact_{fact.replace(' ', '_')}", lang), (fact, lang)


def test_a_runbook_nearly_as_sure_leads_past_a_section_whose_kinds_the_report_does_not_show() -> None:
    from agent.leads import ABOUT_AS_SURE, LESS_SURE_PAST_AN_UNSHOWN_KIND, Retrieved

    host = Retrieved(runbooks()[("host_oom", "en")].source, 0.75)
    gpu_oom_section = ("corpus/001_8c5ded5e8229fdf4.txt", "指南: 故障排查 (`TROUBLESHOOTING.md`) > 问题 1: `CUDA out of memory` (显存不足)")
    slow_section = ("corpus/004_f7d4acab9feaf887.txt", "故障排除指南 > 调试技巧 > 性能画像分析 (Performance Profiling)")
    killed = "training got slower and slower, then it died with Killed while host RAM filled up"  # (no stated kind)
    assert ABOUT_AS_SURE < 0.85 - 0.75 <= LESS_SURE_PAST_AN_UNSHOWN_KIND
    for section in (gpu_oom_section, slow_section):  # about a kind the report does not show; about no kind
        lead = decide(LeadEvidence(killed, None, [], "en", host, 0.85, section))
        assert lead is not None and lead.kind == "host_oom" and lead.rule == "retrieved", (section, lead)
        far = decide(LeadEvidence(killed, None, [], "en", Retrieved(host.source, 0.65), 0.85, section))
        assert far is None or far.kind != "host_oom"
    # the report shows the section's own kind too: the section's likeness counts, the runbook must be as sure
    both = killed + "\nRuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
    lead = decide(LeadEvidence(both, None, [], "en", host, 0.85, gpu_oom_section))
    assert lead is None or lead.rule != "retrieved" or lead.kind != "host_oom", lead
    # a team's section (not recorded) is not judged: the ordinary margin holds
    team = decide(LeadEvidence(killed, None, [], "en", host, 0.85, ("/team/wiki/memory.md", "Memory > Slow steps")))
    assert team is None or team.kind != "host_oom" or team.rule != "retrieved", team


@pytest.mark.parametrize(("text", "name", "value"), [
    ("Training hangs on 2x RTX 4090. I already set NCCL_P2P_DISABLE=1, still stuck.", "NCCL_P2P_DISABLE", "1"),
    ("单机8卡，已经设置了 NCCL_IB_DISABLE=1，训练还是卡住", "NCCL_IB_DISABLE", "1"),
    ("we export NCCL_SOCKET_IFNAME=eth0.", "NCCL_SOCKET_IFNAME", "eth0"),
    ("NCCL_IB_HCA=mlx5_0:1 is set", "NCCL_IB_HCA", "mlx5_0:1"),
])
def test_a_variable_stated_in_prose_keeps_its_value_without_the_punctuation_after_it(text: str, name: str,
                                                                                      value: str) -> None:
    assert read_setup([text]).settings == (Stated(name, value),)
    assert read_setup([text]).already(f"export {name}={value}") == Stated(name, value)


@pytest.mark.parametrize(("line", "thing"), [
    ("It fails on the first import: Python can't find a module named torchtitan, since train.py moved", "torchtitan"),
    ("ModuleNotFoundError: No module named 'flash_attn_3'", "flash_attn_3"),
    ("the worker could not import module named `training.data`", "training.data"),
])
def test_a_missing_module_is_read_where_the_asker_says_it_in_words(line: str, thing: str) -> None:
    raised = recognise([line])
    assert raised is not None and raised.name == "module_missing" and raised.thing == thing, raised


def test_a_missing_module_said_in_words_that_is_the_project_s_own_leads_with_its_import_runbook() -> None:
    lead = decide(LeadEvidence("After moving train.py into the package, Python can't find a module named "
                               "torchtitan when torchrun starts it", None, [], "en"))
    assert lead is not None and lead.kind == "own_package_import", lead


@pytest.mark.parametrize(("line", "kind", "fix"), [
    ("ImportError: vllm>=0.4.3,<=0.7.3 is required for a normal functioning of this module, but found vllm==0.8.1.",
     "vllm_unsupported", "trl[vllm]"),  # the range the framework pins, installed rather than upgraded past
    ("ImportError: transformers>=4.41.2,<=4.46.1 is required for a normal functioning of this module, but found "
     "transformers==4.48.0.", "hf_api_change", ""),
])
def test_a_version_range_checked_at_import_names_the_package_outside_it(line: str, kind: str, fix: str) -> None:
    raised = recognise([line])
    assert raised is not None and raised.name == "version_required", raised
    lead = decide(LeadEvidence(line, None, [line], "en"))
    assert lead is not None and (lead.kind, lead.rule, lead.fix) == (kind, "named_thing", fix), lead


def test_a_version_range_of_another_package_leads_with_no_runbook_and_says_its_check() -> None:
    line = ("ImportError: tokenizers>=0.11.1,!=0.11.3,<0.14 is required for a normal functioning of this module, "
            "but found tokenizers==0.19.1.")
    raised = recognise([line])
    assert raised is not None and raised.thing == "tokenizers" and "pip show tokenizers" in raised.check
    assert decide(LeadEvidence(line, None, [line], "en")) is None


@pytest.mark.parametrize(("lines", "thing", "kind"), [
    (["Keyerror ：text"], "text", "chat_template_format"),  # retyped: case and a full-width colon
    (["与我的报错的keyerror：text似乎相符"], "text", "chat_template_format"),  # unquoted, Chinese prose after it
    (["KeyError: 'instruction'"], "instruction", "chat_template_format"),
    (["KeyError: 'input ids'"], "input ids", ""),
])
def test_a_missing_key_is_read_as_the_asker_typed_it(lines: list[str], thing: str, kind: str) -> None:
    raised = recognise(lines)
    assert raised is not None and (raised.name, raised.thing, raised.named_kind) == ("key_missing", thing, kind), raised


def test_a_ddp_job_that_hangs_with_no_reducer_error_is_not_the_unused_parameters_kind() -> None:
    from runbooks.registry import ruled_out

    assert ruled_out("ddp_unused_parameters", ("the job hangs",)) == "the job hangs"
    lead = decide(LeadEvidence("code gets stuck at a certain epoch when using ddp; GPU utilization is 0, no error",
                               None, [], "en"))
    assert lead is None or lead.kind != "ddp_unused_parameters", lead
    quoted = ("the job hangs, then: RuntimeError: Expected to have finished reduction in the prior iteration before "
              "starting a new one. This error indicates that your module has parameters that were not used")
    lead = decide(LeadEvidence(quoted, None, [quoted], "en"))
    assert lead is not None and lead.kind == "ddp_unused_parameters", lead  # its own message still leads


@pytest.mark.parametrize(("text", "kind"), [
    ("如何使用v100微调Mini-InternVL-Chat-2B，v100不支持bfloat16，应该如何修改代码", "bf16_unsupported"),
    ("[Issue] 不支持BF16的显卡运行RL快速上手示例出错", "bf16_unsupported"),
    ("bf16 is not supported on our Tesla T4s: how do I fine-tune then?", "bf16_unsupported"),
])
def test_the_asker_s_own_statement_of_a_kind_leads_where_nothing_is_quoted(text: str, kind: str) -> None:
    from runbooks.registry import stated_kind

    assert stated_kind(text) is not None
    lead = decide(LeadEvidence(text, None, [], "zh" if any("\u4e00" <= c <= "\u9fff" for c in text) else "en"))
    assert lead is not None and (lead.kind, lead.rule) == (kind, "stated"), lead


@pytest.mark.parametrize("text", [
    "bf16 training on 8 A100 gives NaN after step 300",  # a GPU with bf16
    "we moved off V100; training with bf16 now",  # no statement that bf16 fails: only 'V100' and bf16 far apart
])
def test_words_that_state_no_kind_outright_do_not_lead_by_themselves(text: str) -> None:
    lead = decide(LeadEvidence(text, None, [], "en"))
    assert lead is None or lead.rule != "stated", lead


@pytest.mark.usefixtures("use_shared_index")
def test_ask_answers_a_stated_kind_with_its_runbook_and_says_why(cli: Any) -> None:
    done = cli("ask", "--json", "--no-probes", "如何在v100上微调，v100不支持bfloat16，应该怎么改？")
    assert done.returncode == 0, done.stderr[-800:]
    answer = json.loads(done.stdout)
    assert answer["lead"]["kind"] == "bf16_unsupported" and answer["lead"]["rule"] == "stated", answer["lead"]
    assert "fp16" in answer["verdict"]["fix"] and "报告说" in answer["answer"]
