"""A user's own runbooks get answerability without any failure family written for them."""

from __future__ import annotations

import json

import pytest

RUNBOOK = """# Cluster runbook

## Job cancelled by Slurm preemption

```
slurmstepd: error: *** JOB 123 ON gpu-07 CANCELLED AT 2025-01-01T00:00:00 DUE TO PREEMPTION ***
```

The gpu-low partition is preemptible: a higher-priority job took the nodes. Resubmit to a partition
that is not preempted, and make the job resumable.

```bash
sbatch --requeue --partition gpu-high train.sbatch
```

## Lustre quota on /scratch

```
OSError: [Errno 122] Disk quota exceeded
```

Check the quota with `lfs quota -u $USER /scratch` and delete old checkpoints.
"""


@pytest.fixture
def runbooks(index_copy, tmp_path, cli):
    folder = tmp_path / "runbooks"
    folder.mkdir()
    (folder / "cluster.md").write_text(RUNBOOK, encoding="utf-8")
    result = cli("traindoc", "index", str(folder))
    assert result.returncode == 0, result.stderr
    return folder


def _ask(cli, question):
    result = cli("ask", "--json", "--no-probes", question)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.slow
def test_a_runbook_section_answers_its_own_error(runbooks, cli):
    answer = _ask(cli, "slurmstepd: error: *** JOB 991 ON gpu-03 CANCELLED AT 2025-02-02T10:00:00 DUE TO PREEMPTION ***\n"
                       "how do I keep my training running?")
    assert answer["no_match"] is False
    assert answer["citations"][0]["source"].endswith("cluster.md")
    assert "preemption" in answer["citations"][0]["section"].lower()
    assert isinstance(answer["confidence"], float) and 0.0 <= answer["confidence"] <= 1.0
    assert "sbatch --requeue" in answer["answer"]


@pytest.mark.slow
def test_what_no_runbook_describes_is_no_match_that_still_helps(runbooks, cli):
    answer = _ask(cli, "Kubernetes pod stuck in ImagePullBackOff while pulling the trainer image from ECR")
    assert answer["no_match"] is True and answer["citations"] == []
    assert 0.0 <= answer["confidence"] < 0.5
    body = answer["answer"]
    assert "Nearest sections" in body and "What to collect next" in body
    assert "### Fixes" not in body
