"""Where the training frameworks make a rank wait on its peers, read from its stack.

A rank that waits for its peers is not always inside a ``torch.distributed`` call on its Python stack:

- DDP all-reduces the gradients from hooks the autograd engine runs: the Python stack shows only ``loss.backward()``
  (``torch/autograd/graph.py _engine_run_backward``); native frames show ``c10d::Reducer::finalize_backward`` waiting
  on the all-reduce's ``Work``. DeepSpeed's ``engine.backward`` and ``engine.step`` wait the same way, and ZeRO's
  all-gather / reduce-scatter and FSDP's (FSDP2's ``foreach_all_gather``, FSDP1's ``_all_gather``) reach
  ``torch.distributed`` through the framework's own frames, which name the framework.
- NCCL runs on the GPU: the Python thread returns from the collective at once and waits later, in a CUDA
  synchronisation (``torch.cuda.synchronize``, ``.item()``, ``.cpu()``; natively ``cudaStreamSynchronize``,
  ``cuCtxSynchronize``). Such a frame alone cannot tell a rank running its own long kernel from one waiting for a
  peer's collective: that is said, and Flight Recorder or the other ranks' stacks decide.

``framework_wait`` returns what a stack shows of this, innermost first; jobs.stacks turns it into the verdict.
The frames' names come from the installed torch 2.13 (torch/autograd/graph.py, torch/nn/parallel/distributed.py,
torch/distributed/fsdp/) and DeepSpeed 0.18 (deepspeed/runtime/engine.py, deepspeed/runtime/zero/).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from jobs.places import Phrase, phrased
from jobs.pyspy import Frame

# Outer frames that name the framework a wait belongs to (the first found, innermost first, names it).
FRAMEWORKS = (
    ("torch/distributed/fsdp/", "FSDP"),
    ("torch/nn/parallel/distributed.py", "DDP"),
    ("torch/distributed/algorithms/ddp_comm_hooks/", "DDP"),
    ("deepspeed/runtime/zero/", "DeepSpeed ZeRO"),
    ("deepspeed/runtime/", "DeepSpeed"),
)
# The autograd engine's entry points: a rank of a DDP or DeepSpeed job waits in them for the gradients' all-reduce.
BACKWARD = (("torch/autograd/graph.py", "_engine_run_backward"), ("torch/autograd/__init__.py", "backward"),
            ("torch/autograd/__init__.py", "grad"))
# Python frames of a CUDA synchronisation (a .item() or .cpu() is a C call: only native frames show it).
DEVICE_SYNC = (("torch/cuda/__init__.py", "synchronize"), ("torch/cuda/streams.py", "synchronize"),
               ("torch/cuda/streams.py", "wait"))
NATIVE_COLLECTIVE = re.compile(r"c10d::Reducer::|c10d::ProcessGroup\w*::|::Work(?:NCCL|Gloo)?::wait|c10d::\w*Work\w*::wait|"
                               r"\bgloo::|\bnccl[A-Z]\w*")
NATIVE_DEVICE_SYNC = re.compile(r"\bcu(?:da)?(?:Stream|Ctx|Device|Event)Synchronize|\bcudaMemcpy\w*|\bcuMemcpy\w*")

WaitKind = Literal["collective", "device"]


@dataclass(frozen=True)
class FrameworkWait:
    kind: WaitKind
    label: str  # "DDP's gradient all-reduce in backward", "FSDP's dist.all_gather_single", "a CUDA synchronize"
    frame: Frame  # the innermost frame that shows it
    inferred: bool = False  # from Python frames that a long computation shows too (no native frame confirms it)
    phrase: Phrase | None = None  # the label's phrase key and values


def _file(frame: Frame) -> str:
    return frame.file.replace("\\", "/")


def framework_of(frames: Sequence[Frame]) -> str | None:
    """The framework whose frames are on the stack (innermost first), if any."""
    for frame in frames:
        path = _file(frame)
        name = next((label for marker, label in FRAMEWORKS if marker in path), None)
        if name is not None:
            return name
    return None


def _at(frame: Frame, table: Sequence[tuple[str, str]]) -> bool:
    path, name = _file(frame), frame.function.rsplit(".", 1)[-1]
    return any(marker in path for marker, function in table if name == function)


def framework_wait(frames: Sequence[Frame]) -> FrameworkWait | None:
    """A wait on the peers or on the GPU that no torch.distributed frame shows, innermost first: a native collective
    wait, a CUDA synchronisation, the autograd engine (inferred: DDP's all-reduce, or a long backward)."""
    native = [f for f in frames if f.kind == "native"]
    python = [f for f in frames if f.kind != "native"]
    framework = framework_of(python)
    waiting = next((f for f in native if NATIVE_COLLECTIVE.search(f.function)), None)
    syncing = next((f for f in native if NATIVE_DEVICE_SYNC.search(f.function)), None)
    backward = next((f for f in python if _at(f, BACKWARD)), None)
    if waiting is not None:
        reducer = "Reducer" in waiting.function
        what = "all_reduce" if reducer else "collective" if framework else "a_collective"
        named = {"owner": "DDP" if reducer else framework or ""} if reducer or framework else {}
        label, phrase = phrased(f"hang.label.{what}_in_backward" if backward else f"hang.label.{what}", **named)
        return FrameworkWait("collective", label, backward or (python[0] if python else waiting), phrase=phrase)
    if backward is not None and syncing is None and (native == [] or framework is not None):
        owner = framework if framework and framework.startswith("DeepSpeed") else "DDP"
        label, phrase = phrased("hang.label.backward_waits", owner=owner)
        return FrameworkWait("collective", label, backward, inferred=not native, phrase=phrase)
    sync = next((f for f in python if _at(f, DEVICE_SYNC)), None)
    if syncing is not None or sync is not None:
        device_frame = sync or (python[0] if python else syncing)
        assert device_frame is not None
        label, phrase = phrased("hang.label.cuda_sync")
        return FrameworkWait("device", label, device_frame, phrase=phrase)
    return None


__all__ = ["FRAMEWORKS", "FrameworkWait", "framework_of", "framework_wait"]
