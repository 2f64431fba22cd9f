"""The verdict readers of the job reader (lines -> events -> timeline -> verdict -> words), in the order they
are asked: the first whose kind of job this is decides. A new kind of verdict is one module here with
``read(timeline, question) -> Verdict | None`` and one entry in ``READERS``."""

from jobs.verdicts import launcher, root, silence, waits

READERS = (
    root.read,  # something failed of its own accord: the earliest failure is the cause
    waits.read,  # every failure is a wait: who the others waited for
    silence.read,  # no failure, and the job hangs: where the log stopped
    launcher.read,  # the launcher's report and reaction alone
)
