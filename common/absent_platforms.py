"""Lines of an environment report that name a platform or a package only to say it is not there.

``accelerate env``, ``python -m torch.utils.collect_env``, ``transformers env`` and inference engines' own checks
print "PyTorch XPU available: False", "PyTorch NPU available: False", "MUSA available: False", "ROCM used to build
PyTorch: N/A" on every CUDA machine. Such a line states that the platform is absent, never that the job runs on
it: the readers of a report's platform (corpus.families, agent.stated) read the text without them. Likewise
``transformers env``'s "- DeepSpeed version: not installed" names no DeepSpeed job: the words that name a hang's
stage (runbooks.choose) and a kind's signals (agent.leads) are read without such lines.
"""

from __future__ import annotations

import re

# A line naming a platform, then (within a label) a colon or equals sign and a value that says "none".
ABSENT = re.compile(
    r"(?im)^[^\n]{0,60}?\b(?:XPU|NPU|MLU|MUSA|MPS|HPU|TPU|XLA|ROCm|HIP)\b[^\n:=]{0,40}[:=][ \t]*"
    r"(?:False|No|N/?A|None|0|not available)[ \t]*\r?$")


# A package's line of an environment listing whose value says it is absent.
ABSENT_PACKAGE = re.compile(r"(?im)^[ \t>*-]{0,6}[\w .-]{1,40}?(?:version)?\s?[:=]\s?(?:not installed|none|n/a)\s*$")


def without_absent_packages(text: str) -> str:
    """``text`` with every line of an environment listing that names a package as absent left empty."""
    return ABSENT_PACKAGE.sub("", text) if ":" in text or "=" in text else text


def without_absent_platforms(text: str) -> str:
    """``text`` with every line that only says a platform is absent left empty."""
    return ABSENT.sub("", text) if ":" in text or "=" in text else text


__all__ = ["ABSENT", "ABSENT_PACKAGE", "without_absent_packages", "without_absent_platforms"]
