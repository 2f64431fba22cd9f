"""Lines of an environment report that name a platform only to say it is not there.

``accelerate env``, ``python -m torch.utils.collect_env``, ``transformers env`` and inference engines' own checks
print "PyTorch XPU available: False", "PyTorch NPU available: False", "MUSA available: False", "ROCM used to build
PyTorch: N/A" on every CUDA machine. Such a line states that the platform is absent, never that the job runs on
it: the readers of a report's platform (corpus.families, agent.stated) read the text without them.
"""

from __future__ import annotations

import re

# A line naming a platform, then (within a label) a colon or equals sign and a value that says "none".
ABSENT = re.compile(
    r"(?im)^[^\n]{0,60}?\b(?:XPU|NPU|MLU|MUSA|MPS|HPU|TPU|XLA|ROCm|HIP)\b[^\n:=]{0,40}[:=][ \t]*"
    r"(?:False|No|N/?A|None|0|not available)[ \t]*\r?$")


def without_absent_platforms(text: str) -> str:
    """``text`` with every line that only says a platform is absent left empty."""
    return ABSENT.sub("", text) if ":" in text or "=" in text else text


__all__ = ["ABSENT", "without_absent_platforms"]
