"""An argument a Hugging Face release renamed or removed (advice/data/renamed_arguments.json) is named as such:
``got an unexpected keyword argument 'use_flash_attention_2'`` refused by a model class leads the API-change runbook,
whose first fix says which release dropped it and what to pass instead, in the asker's language; the same argument
passed on the command line is answered with the new flag; an unexpected keyword argument the table does not know
leads no runbook on its name alone."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from clikit import isolated_env, run_cli

from advice.renamed import _table, look_up, refused

TABLE = Path(__file__).resolve().parents[2] / "advice" / "data" / "renamed_arguments.json"


def test_every_row_is_sourced_and_says_what_replaces_it() -> None:
    rows = json.loads(TABLE.read_text(encoding="utf-8"))["arguments"]
    assert len(rows) == len(_table()) >= 30
    for row in rows:
        assert row["source"].startswith("https://"), row
        assert re.fullmatch(r"\d+\.\d+(?:\.\d+)?", row["gone_in"]), row
        assert row.get("new") or row.get("instead"), row  # something to do instead
        assert bool(row.get("instead")) == bool(row.get("instead_zh")), row  # in both languages
        re.compile(row.get("where", ""))


def test_the_class_that_refused_it_picks_the_row() -> None:
    trl, transformers = look_up("tokenizer", "SFTTrainer"), look_up("tokenizer", "Trainer")
    assert trl is not None and trl.project == "TRL" and trl.gone_in == "0.16"
    assert transformers is not None and transformers.project == "transformers" and transformers.gone_in == "5.0"
    config = look_up("max_seq_length", "SFTConfig")
    assert config is not None and config.new == "max_length"
    assert look_up("tokenizer", "MyCollator") is None  # another class's own argument
    assert look_up("use_flash_attention_2", "LlamaForCausalLM") is not None
    assert look_up("pad_to_multiple", "") is None
    accelerator, arguments = look_up("logging_dir", "Accelerator"), look_up("logging_dir", "TrainingArguments")
    assert accelerator is not None and (accelerator.project, accelerator.new) == ("accelerate", "project_dir")
    assert arguments is not None and (arguments.project, arguments.new) == ("transformers", "")


def test_the_command_line_and_code_forms_are_told_apart() -> None:
    shown = refused(["ValueError: Some specified arguments are not used by the HfArgumentParser: "
                     "['--evaluation_strategy', 'steps', '--no_cuda']",
                     "TypeError: TrainingArguments.__init__() got an unexpected keyword argument 'evaluation_strategy'"])
    assert [(row.old, flag) for row, flag in shown] == [("evaluation_strategy", True), ("no_cuda", True)]


CASES = [
    ("flash", "Traceback (most recent call last):\n  File \"/home/u/train.py\", line 41, in <module>\n"
              "    model = AutoModelForCausalLM.from_pretrained(path, use_flash_attention_2=True)\n"
              "TypeError: LlamaForCausalLM.__init__() got an unexpected keyword argument 'use_flash_attention_2'"),
    ("flash_zh", "升级 transformers 之后加载模型报错：TypeError: Qwen2ForCausalLM.__init__() got an unexpected keyword "
                 "argument 'use_flash_attention_2'"),
    ("cli", "ValueError: Some specified arguments are not used by the HfArgumentParser: ['--evaluation_strategy', 'steps']"),
    ("unknown", "TypeError: MyCollator.__init__() got an unexpected keyword argument 'pad_to_multiple'"),
]


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory, shared_index: Path) -> dict[str, dict[str, Any]]:
    home = tmp_path_factory.mktemp("renamed")
    batch = home / "cases.jsonl"
    batch.write_text("".join(json.dumps({"id": key, "query": query}, ensure_ascii=False) + "\n"
                             for key, query in CASES), encoding="utf-8")
    env = {**isolated_env(home), "TRAINDOC_DATA_DIR": str(shared_index)}
    done = run_cli("ask", "--batch", str(batch), "--json", "--no-probes", env=env)
    assert done.returncode == 0, done.stderr[-600:]
    return {row["id"]: row for row in map(json.loads, done.stdout.splitlines())}


def test_a_model_class_refusing_use_flash_attention_2_gets_attn_implementation_first(answers: dict) -> None:
    answer = answers["flash"]
    assert answer["lead"]["kind"] == "hf_api_change"
    fix = answer["verdict"]["fix"]
    assert 'attn_implementation="flash_attention_2"' in fix and "grep -rnw 'use_flash_attention_2'" in fix
    assert "transformers 5.0" in answer["answer"]


def test_a_chinese_asker_reads_it_in_chinese(answers: dict) -> None:
    answer = answers["flash_zh"]
    assert answer["lead"]["kind"] == "hf_api_change"
    assert "起已没有 `use_flash_attention_2`" in answer["answer"]
    assert 'attn_implementation="flash_attention_2"' in answer["verdict"]["fix"]


def test_the_command_line_form_gets_the_new_flag(answers: dict) -> None:
    assert "--eval_strategy ...   # was --evaluation_strategy" in answers["cli"]["verdict"]["fix"]


def test_an_argument_the_table_does_not_know_leads_no_runbook(answers: dict) -> None:
    answer = answers["unknown"]
    assert (answer.get("lead") or {}).get("kind") != "hf_api_change"
    assert "pad_to_multiple" in answer["verdict"]["cause"]
