"""A quoted message that is only the generic head of other documents' messages (``torch.distributed.DistBackendError:
NCCL error``, the start of a duplicate GPU, an interface error and a lost peer alike) does not make a section "quote"
a question's error: SignatureIndex.specific on synthetic messages, and the real CLI on a real-shaped NCCL error."""

from __future__ import annotations

import json

import numpy as np
import pytest
from clikit import CliRunner, documents, runbook_of

from corpus.snapshot import SignatureIndex, signature

HEAD = "torch.distributed.DistBackendError: NCCL error"
LONGER = {
    "duplicate": f"{HEAD} in: ProcessGroupNCCL.cpp:1970, invalid usage, Duplicate GPU detected rank 1 rank 0 both on device",
    "interface": f"{HEAD} in: ProcessGroupNCCL.cpp:1970, internal error, Bootstrap no socket interface found ifname",
    "peer": f"{HEAD} in: ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error, peer lost",
}


def _index(messages_by_document: list[list[str]]) -> tuple[SignatureIndex, np.ndarray]:
    """One chunk per document here: chunk i belongs to document i."""
    index = SignatureIndex([[signature(m) for m in messages] for messages in messages_by_document])
    return index, np.arange(len(messages_by_document), dtype=np.int32)


def test_the_head_of_three_other_documents_longer_messages_is_generic() -> None:
    index, documents_of = _index([[HEAD], *([m] for m in LONGER.values())])
    assert index.specific(documents_of).tolist() == [0.0, 1.0, 1.0, 1.0]


def test_a_message_other_documents_quote_alike_stays_specific() -> None:
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    index, documents_of = _index([[oom], [oom + " GPU 0"], [oom], [oom]])  # the same message, not a longer one
    assert index.specific(documents_of).tolist() == [1.0, 1.0, 1.0, 1.0]


def test_two_other_documents_are_not_enough_and_its_own_document_never_counts() -> None:
    two = list(LONGER.values())[:2]
    index, documents_of = _index([[HEAD], [two[0]], [two[1]]])
    assert index.specific(documents_of).tolist() == [1.0, 1.0, 1.0]
    index = SignatureIndex([[signature(HEAD)], *([signature(m)] for m in LONGER.values())])
    assert index.specific(np.zeros(4, dtype=np.int32)).tolist() == [1.0] * 4  # all one document


def test_the_share_counted_leaves_out_the_generic_messages() -> None:
    per_chunk = [[signature(HEAD)], *([signature(m)] for m in LONGER.values())]
    index = SignatureIndex(per_chunk, np.arange(len(per_chunk), dtype=np.int32))
    everything, specific = index.best_shares([signature(LONGER["duplicate"])])
    assert everything[0] == pytest.approx(1.0)  # the head is all inside the asked line
    assert specific[0] == 0.0
    assert everything[1] == pytest.approx(1.0)
    assert SignatureIndex(per_chunk).best_shares([signature(HEAD)])[1][0] == pytest.approx(1.0)  # no documents: all count


@pytest.mark.usefixtures("use_shared_index")
def test_a_duplicate_gpu_error_is_not_followed_by_a_section_that_quotes_only_its_generic_head(cli: CliRunner) -> None:
    pasted = ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
              "invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.21.5\n"
              "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\nLast error:\n"
              "Duplicate GPU detected : rank 3 and rank 2 both on CUDA device 41000")
    result = cli("ask", "--json", "--no-probes", pasted)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert runbook_of(answer["citations"]) == "duplicate_gpu", answer["citations"][:2]
    # the seed's CUDA compatibility section quotes only `DistBackendError: NCCL error`: it is about another failure
    assert not any("CUDA兼容性" in c["section"] for c in documents(answer["citations"])), answer["citations"]


def test_an_exception_class_is_one_word_of_a_message() -> None:
    """The class with its modules is one word, so two messages of one class share one word, not three."""
    assert signature("torch.distributed.DistBackendError: NCCL error") >= {"distbackenderror", "nccl"}
    assert not signature("torch.distributed.DistBackendError: NCCL error") & {"torch", "distributed", "backend"}
    inplace, timeout = signature("RuntimeError: modified by an inplace operation"), signature("RuntimeError: NCCL timeout")
    assert inplace & timeout == {"runtimeerror"}
    index = SignatureIndex([[signature("RuntimeError: NCCL communicator was aborted after a timeout")]])
    assert index.best_shares([inplace])[0][0] < 0.5  # the class and nothing else: the section does not quote it
