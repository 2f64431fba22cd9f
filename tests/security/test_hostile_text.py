"""The patterns applied to a question or a log stay right on hostile text, and are written so that they cannot rescan.

How long they take is measured by benchmarks/bench_hostile_input.py (time per KB from 10 KB to 1 MB, as ratios);
here: the rewritten patterns give what the old ones gave on real text, every pattern starts only where a word or
a literal starts, and a question past the cap is read as a pasted log, its error lines found, never dropped.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from hostile_text import fragments, near_misses, sre_parse, user_text_patterns
from hypothesis import given
from hypothesis import strategies as st

from corpus.answerability import identifiers, without_noise
from corpus.errorlines import QUESTION_CAP, is_error_line, looks_like_log, pasted_first, split_long_question
from jobs.reader import read_text
from jobs.signatures import meaning
from tools.registry import select_probes

ROOT = Path(__file__).resolve().parents[2]
# The noise pattern as it was before it was anchored: right, and quadratic on "a.a.a.a...". The reference.
OLD_NOISE = re.compile(
    r"\S*[/\\]\S*"
    r"|\b[\w.-]+\.(?:py|ipynb|json|jsonl|ya?ml|sh|txt|log|cc|cpp|cu|c|h|hpp|md|toml|cfg|ini|csv|pt|pth|bin|ckpt)\b"
    r"|\b\d+(?:\.\d+)+\w*|\b0x[0-9a-f]+\b|\bv\d[\w.]*",
    re.IGNORECASE,
)
# X.*Y restarts at every X; the one unbounded form allowed is "the first X, then Y": ^(?>.*?X).*Y.
RESCANS = re.compile(r"(?<!\\)\.[*+](?!\?\))")
FIRST_THEN = re.compile(r"\^\(\?>\.\*\?[^()]+\)\.\*")


def _real_lines() -> list[str]:
    found: list[str] = []
    for pattern in ("corpus/*.txt", "runbooks/**/*.md", "tests/jobs/**/*.log", "tests/jobs/**/*.txt"):
        for path in sorted(ROOT.glob(pattern)):
            found += path.read_text(encoding="utf-8", errors="replace").splitlines()
    return found


def test_the_noise_pattern_blanks_what_it_blanked_before_on_real_text() -> None:
    lines = _real_lines()
    assert len(lines) > 1000
    assert [without_noise(line) for line in lines] == [OLD_NOISE.sub(" ", line) for line in lines]


@given(st.text(alphabet="a.-/_1vx0 Py:\\Ab", max_size=40))
def test_the_noise_pattern_blanks_what_it_blanked_before_on_any_short_text(text: str) -> None:
    assert without_noise(text) == OLD_NOISE.sub(" ", text)


def test_identifiers_skip_paths_and_file_names_in_a_hostile_question() -> None:
    question = "a-" * 50_000 + " torch.cuda.OutOfMemoryError in /opt/x/train.py and model.ckpt v2.1.0 0xdeadbeef"
    assert identifiers(question) == ["torch.cuda.outofmemoryerror"]


def test_signature_patterns_never_rescan_the_rest_of_a_line() -> None:
    data = json.loads((ROOT / "jobs/data/signatures.json").read_text(encoding="utf-8"))
    for kind in ("root", "symptom", "exits"):
        for row in data[kind]:
            rest = FIRST_THEN.sub("", row["pattern"])
            assert not RESCANS.search(rest), f"{kind} {row.get('category') or row.get('launcher')}: {row['pattern']}"


def test_probe_rule_regexes_start_with_their_literal() -> None:
    """A literal first lets the engine jump between its occurrences (the text is lower-cased, so no IGNORECASE)."""
    rules = json.loads((ROOT / "tools/data/probe_rules.json").read_text(encoding="utf-8"))["rules"]
    for rule in rules:
        for regex in rule["regex"]:
            assert str(sre_parse.parse(regex)[0][0]) == "LITERAL", regex
            assert not any(c.isupper() for c in re.sub(r"\\[A-Za-z]", "", regex)), f"{regex}: the text is lower-cased"


def test_the_rewritten_signatures_still_read_their_lines() -> None:
    lines = {
        "[123.4] oom-kill:constraint=CONSTRAINT_NONE task=python Killed process 99": "host_oom",
        "ERROR: Unexpected bus error encountered in worker. DataLoader worker (pid 4242) is killed by signal: Bus error.":
            "dataloader_worker",
        "node1:1:2 [0] NCCL WARN Cuda call to cudaMalloc failed": "cuda_error",
        "NCCL WARN x: NET/IB : Got completion with error 12, opcode 1": "network",
        "DeepSpeedConfig check: ds_config.json has an invalid value": "config",
        "Timeout reached: torch.distributed.DistBackendError: wait time exceeded": "collective_timeout",
        "socket reset by peer later; Connection refused (tcp)": "peer_closed",
        "remote process exiting soon: NCCL communicator 3 aborted": "peer_closed",
    }
    for line, category in lines.items():
        found = meaning(line)
        assert found is not None and found.category == category, line


def test_probe_selection_still_sees_a_log_file_and_a_hostile_question_picks_nothing_it_should_not() -> None:
    assert "log_grep" in select_probes("see /var/log/train.log.gz for the crash")
    assert "log_grep" in select_probes("rank0.OUT shows it")
    assert "port_check" in select_probes("it HANGS on Port 29500") and select_probes("doom hangout supports") == []
    assert "torch_cuda_compat" in select_probes("no kernel for SM_120")
    assert "log_grep" not in select_probes(".log alone is not a file name")
    assert select_probes("x" * 200_000) == []
    assert "log_grep" not in select_probes("a" * 100_000 + ".logx")


def test_every_pattern_gives_the_same_answer_on_its_near_misses_at_any_length() -> None:
    """A pattern's verdict on a run of its own pieces does not depend on how long the run is (10 and 40 units)."""
    for name, pattern in user_text_patterns().items():
        for short, long in zip(near_misses(pattern.pattern, 400), near_misses(pattern.pattern, 1600), strict=True):
            assert (pattern.search(short) is None) == (pattern.search(long) is None) or len(short) < 400, name


def test_fragments_are_read_from_the_pattern() -> None:
    assert fragments("^(?>.*?oom-kill).*Killed process") == ["Killed process", "oom-kill"]


def test_a_question_within_the_cap_is_a_question() -> None:
    assert split_long_question("why does NCCL hang?\n" * 10) is None


def test_a_question_past_the_cap_is_read_as_a_pasted_log_and_its_error_found() -> None:
    words = "my 8-GPU job died overnight, why?"
    filler = "\n".join(f"[rank0]: step {i} loss 1.{i % 97:02d} " + "x" * 300 for i in range(200))
    text = f"{words}\n{filler}\n[rank0]: " + "y" * 2_000_000 + "\n[rank3]: torch.OutOfMemoryError: CUDA out of memory.\n"
    assert len(text) > QUESTION_CAP
    split = split_long_question(text)
    assert split is not None
    opening, paste = split
    assert opening == words and paste == text
    lines = [line.text for line in read_text(paste)]
    assert any("torch.OutOfMemoryError" in line for line in lines)
    assert max(len(line) for line in lines) <= 2000  # the 2 MB line is cut, not read whole


def test_a_long_paste_that_starts_with_the_log_has_no_words_of_its_own() -> None:
    text = "[rank0]: Traceback (most recent call last):\n" + "  File \"train.py\", line 1\n" * 2000
    split = split_long_question(text)
    assert split is not None and split[0] == ""


def test_error_lines_are_read_from_the_start_of_a_megabyte_line() -> None:
    line = "RuntimeError: CUDA error: an illegal memory access " + "z" * 1_000_000
    assert is_error_line(line)
    assert looks_like_log(line + "\nmore\n")
    assert pasted_first(["it failed, why?", line]) == [line]
    assert not is_error_line("z" * 1_000_000 + " RuntimeError: late")  # past what is read of a line
