"""A CUDA OOM that comes only while evaluating is the Trainer keeping every evaluation step's predictions on the
GPU: cuda_oom's fix 6 (eval_accumulation_steps, preprocess_logits_for_metrics) comes first there, and the runbook's
own order (a smaller training micro-batch) everywhere else. The reports are written for these tests."""

from __future__ import annotations

import pytest

from agent.leads import LeadEvidence, decide
from runbooks.catalog import runbooks

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 7.81 GiB. GPU 0 has a total capacity of 79.11 "
       "GiB of which 5.10 GiB is free.")


@pytest.mark.parametrize(("report", "first"), [
    ("I always hit this during the evaluation phase of fine-tuning, training steps are fine:\n" + OOM,
     "--eval_accumulation_steps 4"),
    ("训练正常，每次到评估时就报错：\n" + OOM, "--eval_accumulation_steps 4"),
    ("OOM at step 10 of training:\n" + OOM, ""),
])
def test_an_oom_while_evaluating_leads_with_the_evaluation_fix(report: str, first: str) -> None:
    lang = "zh" if "评估" in report else "en"
    lead = decide(LeadEvidence(report, None, [OOM], lang))
    assert lead is not None and lead.kind == "cuda_oom", lead
    assert lead.fix == first, lead.fix
    for language in ("en", "zh"):
        assert "--eval_accumulation_steps 4" in runbooks()[("cuda_oom", language)].body
