"""The answerability signals on a small synthetic knowledge base: each row a question, a section, and
what the evidence must say. Nothing here comes from an evaluation set."""

from __future__ import annotations

import numpy as np
import pytest

from corpus.answerability import FEATURES, AnswerabilityModel, Evidence, document_frequency, evidence, identifiers
from corpus.families import catalogue, covered, recognise
from corpus.lexical import BM25Index, tokenize

SECTIONS = {
    "slurm": "## Job preempted on the gpu partition\nsqueue shows PREEMPTED; the job was requeued. "
             "Set --requeue and checkpoint every 30 minutes with save_interval.",
    "scratch": "## Disk quota exceeded on /scratch\n```\nOSError: [Errno 122] Disk quota exceeded\n```\n"
               "Clean old checkpoints with `lfs quota -u $USER /scratch` and set max_checkpoints.",
    "nccl": "## NCCL watchdog timeout\n```\nWatchdog caught collective operation timeout: WorkNCCL\n```\n"
            "Check NCCL_SOCKET_IFNAME and raise TORCH_NCCL_BLOCKING_WAIT only while debugging.",
    "oom": "## CUDA out of memory\n```\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate\n```\n"
           "Lower the micro batch size, enable gradient checkpointing.",
}
BM25 = BM25Index([tokenize(text) for text in SECTIONS.values()])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("RuntimeError: CUBLAS_STATUS_EXECUTION_FAILED when calling cublasGemmEx", {"cublas_status_execution_failed",
                                                                                   "cublasgemmex"}),
        ("GatedRepoError: 401 Client Error", {"gatedrepoerror"}),
        ("set --max-restarts and NCCL_DEBUG=INFO", {"max-restarts", "nccl_debug"}),
        ("tokenizer.chat_template is not set", {"tokenizer.chat_template"}),
        ("aten::isin.Tensor_Tensor_out on device mps", {"aten::isin.tensor_tensor_out"}),
        # noise: paths, URLs, versions, script names, log levels, glog prefixes, builtin exceptions
        ("File /home/u/train.py, https://x.org/a/b, torch 2.5.1, E0406 INFO ValueError: bad", set()),
        ("运行 ppo的时候出现了cuda 报错", set()),  # CJK next to ASCII is no identifier
    ],
    ids=["cublas", "camel-class", "flags-env", "dotted", "cpp-op", "noise", "cjk"],
)
def test_identifiers(text, expected):
    assert set(identifiers(text)) == expected


def test_document_frequency_reads_back_the_index():
    assert document_frequency(BM25, "nccl_socket_ifname") == 1
    assert document_frequency(BM25, "checkpoints") == 1
    assert document_frequency(BM25, "kubernetes") == 0


def _evidence(question: str, section: str, errors: tuple[str, ...] = (), **kw: float) -> Evidence:
    values = {"quoted_error": 0.0, "dense": 0.8, "dense_others": [0.8], "ranks": [0, 0, 0], "family": 0.0} | kw
    return evidence(question=question, errors=list(errors), section_text=SECTIONS[section], bm25=BM25,
                    **values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("question", "section", "check"),
    [
        # Terms the knowledge base never mentions are evidence against.
        ("kubectl describe pod shows ImagePullBackOff for the trainer image", "slurm",
         lambda e: e.ident_oov == 1.0 and e.word_oov > 0.5),
        ("Why does squeue say PREEMPTED and how do I requeue the job?", "slurm",
         lambda e: e.ident_oov == 0.0 and e.word_oov < 0.5),
        # The error line's terms found in the section.
        ("OSError: [Errno 122] Disk quota exceeded while saving", "scratch", lambda e: e.error_cover > 0.5),
        ("OSError: [Errno 122] Disk quota exceeded while saving", "oom", lambda e: e.error_cover < 0.3),
        # Known general words do not hide one unknown distinctive identifier.
        ("UnpicklingError while loading checkpoints", "scratch", lambda e: e.ident_oov == 1.0),
        # Both unknown together.
        ("helm chart values.yaml ingress annotations", "nccl", lambda e: e.unknown == pytest.approx(e.ident_oov * e.word_oov)),
    ],
    ids=["oov-against", "in-vocabulary", "error-covered", "error-elsewhere", "unknown-class", "product"],
)
def test_vocabulary_and_error_evidence(question, section, check):
    assert check(_evidence(question, section))


def test_error_lines_are_the_key_when_given():
    found = _evidence("my job died overnight", "nccl",
                      errors=("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7)",))
    assert found.error_cover > 0.5


@pytest.mark.parametrize(
    ("dense", "others", "ranks", "margin_positive", "agreement"),
    [
        (0.9, [0.7, 0.6, 0.6], [0, 1, 0], True, 1.0),  # stands out, every signal agrees
        (0.8, [0.8, 0.81, 0.79], [5, 0, 7], False, 1 / 3),  # one of many alike, signals disagree
    ],
)
def test_dense_margin_and_agreement(dense, others, ranks, margin_positive, agreement):
    found = _evidence("NCCL watchdog timeout", "nccl", dense=dense, dense_others=others, ranks=ranks)
    assert (found.dense_margin > 0) is margin_positive
    assert found.agreement == pytest.approx(agreement)


@pytest.mark.parametrize(
    ("question", "section_text", "family", "platform"),
    [
        ("CUDA out of memory while training", "显存不足 out of memory: lower the batch size", 1.0, 0.0),
        ("CUDA out of memory while training", "NCCL 超时: raise the timeout", -1.0, 0.0),
        ("the job prints hello", "anything at all", 0.0, 0.0),  # nothing recognised
        ("torch_xla on a TPU v4 pod finds no device", "CUDA driver and nvidia-smi", 0.0, -1.0),
        ("torch_xla on a TPU v4 pod finds no device", "TPU runtime: torch_xla needs libtpu", 0.0, 0.0),
    ],
    ids=["family-covered", "family-missed", "none", "platform-missed", "platform-named"],
)
def test_family_and_platform_evidence(question, section_text, family, platform):
    names = [f.name for f in catalogue()]
    covers = np.zeros((1, len(names)), dtype=bool)
    for name in covered(section_text):
        covers[0, names.index(name)] = True
    assert recognise(question, []).evidence(covers, 0) == (family, platform)


def _platform(question: str, errors: list[str]) -> float:
    names = [f.name for f in catalogue()]
    covers = np.zeros((1, len(names)), dtype=bool)
    for name in covered("NCCL_SOCKET_IFNAME picks the interface: Bootstrap : no socket interface found"):
        covers[0, names.index(name)] = True
    return recognise(question, errors).evidence(covers, 0)[1]


def test_a_framework_named_in_the_prose_is_no_veto_but_its_own_error_line_is():
    """JAX, TensorFlow or bitsandbytes in the asker's words do not make an NCCL failure theirs; an error line that is
    the framework's own (its message, its library) does. Hardware platforms veto wherever they are named."""
    nccl = ["NCCL WARN Bootstrap : no socket interface found"]
    assert _platform("Multi-node JAX training fails\nNCCL WARN Bootstrap : no socket interface found", nccl) == 0.0
    assert "JAX" in recognise("Multi-node JAX training fails", nccl).names  # still named in the answer
    own = ["jaxlib.xla_extension.XlaRuntimeError: INTERNAL: no socket interface found"]
    assert _platform("Multi-node training fails\n" + own[0], own) == -1.0
    assert _platform("on our ROCm MI250 nodes: NCCL WARN Bootstrap : no socket interface found", nccl) == -1.0


def _model(**weights: float) -> AnswerabilityModel:
    return AnswerabilityModel(tuple(weights.get(f, 0.0) for f in FEATURES), 0.0, (0.0,) * len(FEATURES),
                              (1.0,) * len(FEATURES), 0.5)


def test_decision_and_confidence():
    model = _model(ident_oov=-4.0, quoted_error=4.0)
    answers, confidence = model.decide(Evidence(quoted_error=1.0))
    assert answers and 0.5 < confidence <= 1.0
    answers, confidence = model.decide(Evidence(ident_oov=1.0))
    assert not answers and 0.0 <= confidence < 0.5


def test_a_section_for_another_platform_never_answers():
    answers, confidence = _model(quoted_error=10.0).decide(Evidence(quoted_error=1.0, platform=-1.0))
    assert not answers and confidence == 0.0


def test_model_round_trips_through_json():
    model = _model(word_oov=-1.5, family=2.0)
    assert AnswerabilityModel.from_json(model.to_json()) == model


@pytest.mark.parametrize(
    ("family", "section_text", "covers"),
    [
        ("FlashAttention install or import", "pip install flash-attn --no-build-isolation\nFlashAttention 节省约130MB显存", False),
        ("FlashAttention install or import", "ImportError: flash_attn_2_cuda...so: undefined symbol: _ZN3c10", True),
        ("device-side assert", "调试时设置 CUDA_LAUNCH_BLOCKING=1 得到准确的报错位置", False),
        ("device-side assert", "RuntimeError: CUDA error: device-side assert triggered", True),
        ("disk full while saving", "保存模型时请指定 save_path", False),
        ("disk full while saving", "OSError: Disk quota exceeded\nRuntimeError: Cannot save checkpoint", True),
        ("NaN / inf loss", "显存溢出: lower the batch size", False),  # an overflow of memory is no NaN
        ("torch.compile failure", "`torch.compile` 可以显著提速", False),  # a speed tip names the topic
        ("torch.compile failure", "torch.compile 报错 BackendCompilerFailed: backend='inductor'", True),
        ("bf16 unsupported on this GPU", "# 使用 BF16 代替 FP16\n--bf16", False),  # a NaN fix that uses bf16
        ("bf16 unsupported on this GPU", "V100 不支持 bf16（计算能力 7.0），改用 fp16", True),
        ("tensor shape mismatch", "profile(record_shapes=True) 记录每个算子的 shape", False),
        ("command-line arguments", "把 batch size 参数调小", False),  # every section has 参数 (parameters)
        ("command-line arguments", "error: unrecognized arguments: --local-rank=0 (命令行参数解析错误)", True),
        ("host RAM exhausted (killed)", "错误3: GPU内存不足", False),  # GPU memory is not the host's
        ("rendezvous / connection failure", "门控网络的初始化有助于专家路由", False),  # a neural network
        ("rendezvous / connection failure", "确保节点之间的网络连接是畅通的", True),
    ],
)
def test_a_family_is_covered_by_a_section_about_the_failure_not_its_topic(family, section_text, covers):
    """A section that installs FlashAttention, saves a model or sets a debugging knob is about the topic; only one
    that shows or names the failure answers a report of it (the catalogue's own rule for `cover`)."""
    assert (family in covered(section_text)) is covers


def test_a_section_outside_the_nearest_chunks_keeps_a_likeness_no_higher_than_theirs():
    from corpus.retrieval import _at_most_nearest

    cosine = np.array([0.0, 0.91, 0.84, 0.0], dtype=np.float32)
    assert _at_most_nearest(cosine, 1) == pytest.approx(0.91)
    assert _at_most_nearest(cosine, 0) == pytest.approx(0.84)  # not 0: at most the farthest of the nearest
    assert _at_most_nearest(np.zeros(3, dtype=np.float32), 2) == 0.0


def test_a_symptom_ranks_the_sections_about_it_but_is_no_evidence_that_one_explains_the_cause():
    """"Stuck" is said of a hung training job and of a Kubernetes pod pulling an image alike: a hang section covers
    the symptom, not the cause, so it moves up without counting as the answer."""
    names = [f.name for f in catalogue()]
    covers = np.zeros((2, len(names)), dtype=bool)
    for row, text in enumerate(["训练卡住 (hang): 检查每个 rank", "CUDA out of memory: lower the batch size"]):
        for name in covered(text):
            covers[row, names.index(name)] = True
    found = recognise("my pod is stuck in ImagePullBackOff", [])
    assert "job hangs / stuck" in found.names and found.ranks
    assert found.evidence(covers, 0) == (0.0, 0.0)  # covered, and still no evidence
    assert list(found.coverage_matrix(covers)) == [1.0, 0.0]  # but it ranks first


def test_an_english_word_glued_to_chinese_still_stands_alone():
    """"单卡OOM" and "显存OOM了": \\b between 卡 and O is no boundary for str patterns; families match ASCII words."""
    from corpus.families import detect

    assert "CUDA out of memory" in [f.name for f in detect("lora 单卡OOM，nvidia-smi 显示仅少数卡有显存占用")]
    assert "CUDA out of memory" in [f.name for f in detect("训练到一半显存OOM了")]
    assert "CUDA out of memory" not in [f.name for f in detect("ZOOM meeting notes")]
