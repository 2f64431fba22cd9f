"""The job timeline as a picture: one lane per rank (grouped by node), the events the triage read, the first
failure marked, the consequences greyed after it, the ranks absent from a collective marked. ``lanes`` takes what
the triage read; ``svg`` draws it. Every front end shows the same SVG: `ask --log ... --timeline out.svg`, the web
chat (inline, below the verdict) and Slack (a file in the thread)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from common.language import Lang
from jobs.picture.lanes import JobPicture, Lane, Mark, picture_of

if TYPE_CHECKING:
    from jobs.diagnosis import JobDiagnosis

__all__ = ["JobPicture", "Lane", "Mark", "picture_of", "svg_of"]


def svg_of(diagnosis: JobDiagnosis | None, lang: Lang = "en") -> str | None:
    """The SVG of a diagnosis that carries a picture (a triaged job's logs); None for any other answer."""
    from jobs.picture.svg import timeline_svg  # drawn only when shown: the triage that reads a job draws nothing

    picture = getattr(diagnosis, "picture", None) if diagnosis is not None else None
    return timeline_svg(picture, lang) if isinstance(picture, JobPicture) else None
