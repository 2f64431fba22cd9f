"""A signature is tried only on lines that hold one of its literals (jobs.signatures: the fast prefilter), so every
plain alternative of its pattern must hold one, or that alternative can never match: NCCL's "failed to extend
/dev/shm/nccl-..." was never read as /dev/shm (its row's literal was "shared memory segment"), and the "No space left
on device" beside it made the answer a full disk."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from jobs.signatures import meaning, signatures
from tests.clikit import ask_json, lead_kind

REGEX_SYNTAX = re.compile(r"[][()*+?{}^$|]|\\[dswbDSWBAZ]")


def top_level_alternatives(pattern: str) -> list[str]:
    """The alternatives of ``pattern`` outside any group or class."""
    found, depth, current, at = [], 0, "", 0
    while at < len(pattern):
        char = pattern[at]
        if char == "\\":
            current, at = current + pattern[at:at + 2], at + 2
            continue
        depth += char in "([" and 1 or char in ")]" and -1 or 0
        if char == "|" and depth == 0:
            found.append(current)
            current = ""
        else:
            current += char
        at += 1
    return [*found, current]


def test_top_level_alternatives_are_split_outside_groups() -> None:
    assert top_level_alternatives(r"a\|b|(c|d)|[|]e") == [r"a\|b", "(c|d)", "[|]e"]


def test_every_plain_alternative_holds_one_of_its_signatures_literals() -> None:
    unreachable = [
        (row.category, row.literals, alternative)
        for row in signatures() for alternative in top_level_alternatives(row.pattern.pattern)
        if not REGEX_SYNTAX.search(alternative)
        and not any(literal in re.sub(r"\\(.)", r"\1", alternative) for literal in row.literals)
    ]
    assert not unreachable, unreachable


@pytest.mark.parametrize(("line", "category"), [
    ("node1:812:903 [0] include/shm.h:28 NCCL WARN Error: failed to extend /dev/shm/nccl-7kmWcK to 9637892 bytes",
     "config"),
    ("node1:812:903 [0] include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on device", "config"),
    ("NCCL WARN Error: failed to extend /dev/shm/nccl-7kmWcK to 9637892 bytes, error: No space left on device (28)",
     "config"),  # NCCL's /dev/shm, before the full disk's row reads its 'No space left on device'
    ("OSError: [Errno 28] No space left on device: '/data/ckpt/global_step100/model.pt'", "disk_full"),
    ("RuntimeError: Address already in use", "port_in_use"),
    ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Read error [10.0.0.2]:3456: Broken pipe",
     "peer_closed"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered terminate called after throwing an instance "
     "of 'c10::Error' what(): CUDA error: an illegal memory access was encountered", "cuda_error"),  # joined lines:
    # the abort names the CUDA error it aborts on, the cause
    ("terminate called after throwing an instance of 'c10::DistBackendError'", "process_abort"),
])
def test_a_line_with_only_an_alternatives_words_is_read(line: str, category: str) -> None:
    found = meaning(line)
    assert found is not None and found.category == category, found


@pytest.mark.parametrize("line", [
    "[BUG] Broken pipeline parallel for ESM2",  # a word that starts like one
    "[I ProcessGroupWrapper.cpp:562] [Rank 0] Running collective: CollectiveFingerPrint(SequenceNumber=1277, "
    "OpType=ALLREDUCE)",  # TORCH_DISTRIBUTED_DEBUG=DETAIL's log of every collective, healthy jobs too
    "There are some potential root causes. (3) The worker is crashed unexpectedly due to SIGSEGV or other unexpected "
    "errors.",  # Ray's list of possible causes names a crash nobody saw
    "OutOfMemoryError: out of resource: triton_per_fused_add_7",  # Triton's shared memory per SM, not the GPU's
    "requests.exceptions.ConnectionError: ('Connection aborted.', ConnectionResetError(104, 'Connection reset by "
    "peer'))",  # an HTTP client's download, not a peer rank
    "urllib3.exceptions.ProtocolError: ('Connection aborted.', ConnectionResetError(104, 'Connection reset by peer'))",
])
def test_words_that_name_no_failure_are_not_read_as_one(line: str) -> None:
    found = meaning(line)
    assert found is None or found.category not in ("peer_closed", "collective_mismatch", "native_crash", "oom"), found


@pytest.mark.usefixtures("use_shared_index")
def test_ask_answers_nccls_shm_segment_with_dev_shm_not_a_full_disk(cli: Any) -> None:
    answer = ask_json(cli, "node1:812:903 [0] include/shm.h:28 NCCL WARN Error: failed to extend /dev/shm/nccl-7kmWcK "
                           "to 9637892 bytes\nNo space left on device")
    assert lead_kind(answer) == "dev_shm", answer["lead"]
    assert "--shm-size" in answer["answer"] or "--ipc=host" in answer["answer"]


@pytest.mark.usefixtures("use_shared_index")
def test_ask_reads_a_log_of_nccls_fallocate_failure_as_dev_shm(cli: Any, tmp_path: Any) -> None:
    """NCCL's shm.h says 'Call to posix_fallocate failed: No space left on device' when /dev/shm is too small: the
    job's log names the container's shared memory, not a full disk."""
    log = tmp_path / "rank0.log"
    log.write_text("include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on device\n"
                   "include/shm.h:48 NCCL WARN Error while creating shared memory segment nccl-shm-recv-25-0-1-3 "
                   "(size 9637888)\n", encoding="utf-8")
    done = cli("ask", "--json", "--no-probes", "--log", str(log), "NCCL error in docker")
    assert done.returncode == 0, done.stderr[-800:]
    answer = json.loads(done.stdout)
    assert lead_kind(answer) == "dev_shm", answer["lead"]
