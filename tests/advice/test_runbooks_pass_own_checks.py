"""traindoc's own runbooks pass its own checks: no claim, install check, curated correction or upstream name check
fires on a runbook as the answer shows it (a runbook is written current and sourced; a check that fires on one is
either a wrong runbook or a wrong check). And the checks that made such mistakes stay right where they matter: a
correction written for one GPU generation leaves a runbook's fix for another alone, a dry run or an install into a
fresh environment replaces nobody's torch, the words after a launcher's ``--module X`` are the module's, and
CUDA's data-type names are not environment variables."""

from __future__ import annotations

from pathlib import Path

import pytest
from clikit import ROOT

from advice.installs import risky_install
from advice.names import env_findings, flag_findings
from advice.review import review
from runbooks.catalog import runbooks_in

BOOKS = [pytest.param(book, lang, id=f"{lang}-{kind}") for lang in ("en", "zh")
         for kind, book in sorted(runbooks_in(lang).items())]


@pytest.mark.parametrize(("book", "lang"), BOOKS)
def test_no_check_of_traindoc_fires_on_its_own_runbook(book, lang: str) -> None:  # type: ignore[no-untyped-def]
    text = (ROOT / book.source).read_text(encoding="utf-8")
    shown = review(text, book.source, book.title, lang)
    wrong = [f for f in shown.flags
             # a quoted log line may name a variable nothing reads (the note says so); setting one would be wrong
             if not (f.kind == "name" and f.verdict == "not_read" and f"{f.id}=" not in f.original)]
    assert not wrong, [(f.kind, f.verdict, f.original[:120]) for f in wrong]


def test_a_pascal_gpu_keeps_the_wheels_that_still_carry_its_kernels() -> None:
    book = runbooks_in("en")["arch_mismatch"]
    text = (ROOT / book.source).read_text(encoding="utf-8")
    assert "whl/cu126" in text, "the runbook lost its older-GPU fix: the test lost its subject"
    question = "Tesla P100 with CUDA capability sm_60 is not compatible; I also have an RTX 5090 (sm_120, Blackwell)"
    shown = review(text, book.source, book.title, "en", question=question).text
    assert shown.count("whl/cu126") == text.count("whl/cu126"), "a Blackwell correction rewrote the Pascal fix"


def test_the_blackwell_correction_still_mends_a_seed_section() -> None:
    stale = "RTX 5090 (sm_120):\n```bash\npip install torch --index-url https://download.pytorch.org/whl/cu124\n```"
    source = next(iter(sorted((ROOT / "corpus").glob("00*.txt")))).name
    shown = review(stale, source, "Blackwell", "en")
    assert "whl/cu124" not in shown.text and "whl/cu128" in shown.text
    assert any(f.kind == "curated" for f in shown.flags)


def test_a_dry_run_installs_nothing_and_a_fresh_environment_has_no_torch_to_replace() -> None:
    assert risky_install("pip install vllm") is not None
    assert risky_install('pip install --dry-run vllm 2>&1 | grep "Would install"') is None
    fresh = "```bash\npython -m venv ~/venv-vllm && . ~/venv-vllm/bin/activate\npip install vllm\n```"
    assert not [f for f in review(fresh, "team.md", "vLLM", "en").flags if f.kind == "install"]
    same = "```bash\npip install vllm\npython -m venv ~/venv-after\n```"  # the install ran before the new environment
    assert [f for f in review(same, "team.md", "vLLM", "en").flags if f.kind == "install"]


def test_the_words_after_a_launchers_module_are_the_modules_own() -> None:
    assert not [f for f in flag_findings("deepspeed --module mypkg.train --deepspeed ds_config.json") if f.flagged]
    assert not [f for f in flag_findings("torchrun --nproc-per-node 2 -m mypkg.train --no-such-flag") if f.flagged]
    before = [f.name for f in flag_findings("torchrun --no-such-launcher-flag 1 -m mypkg.train") if f.flagged]
    assert before == ["--no-such-launcher-flag"]


@pytest.mark.parametrize("name", ["CUDA_R_16BF", "CUDA_R_16F", "CUDA_C_32F", "CUDA_R_8I"])
def test_cudas_data_type_names_are_not_variables(name: str) -> None:
    assert not list(env_findings(f"cublasGemmEx(... `{name}` ...) answered NOT_SUPPORTED"))
    assert [f for f in env_findings("export CUDA_NO_SUCH_VARIABLE=1") if f.flagged]


def test_every_runbook_file_is_one_the_catalogue_lists() -> None:
    listed = {Path(book.source).name for book in runbooks_in("en").values()}
    assert listed == {p.name for p in (ROOT / "corpus" / "runbooks" / "en").glob("*.md")}
