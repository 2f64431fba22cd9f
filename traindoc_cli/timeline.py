"""`ask --log ... --timeline out.svg`: the triaged job drawn (``jobs.picture``), written before the answer is
asked for, so that a path that cannot be written fails fast, and the answer printed is the same as without it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from common.errors import InputError, UsageError


def write_timeline(path: Path, question: Any, logs_given: bool) -> None:
    """Write the picture of ``question.job`` to ``path``; one clear error when there is no job to draw or the file
    cannot be written."""
    from jobs.picture import svg_of

    job = question.job
    if job is None and not logs_given and not question.log_head:
        raise UsageError("--timeline draws a job's logs: none was given",
                         hint="ask --log train.log --timeline out.svg, or pipe the log in")
    svg = svg_of(job, question.lang or "en")
    if svg is None:
        raise InputError("--timeline: the logs show no failure, wait or stop of the job to draw",
                         hint="the answer below the logs still applies; run without --timeline")
    try:
        path.write_text(svg, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write the timeline to {path}: {exc.strerror or exc}") from exc
