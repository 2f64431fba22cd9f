"""Writes a fake ``torch`` package into a directory, to put on the target interpreter's PYTHONPATH."""

from __future__ import annotations

from pathlib import Path

_INIT = '''
__version__ = {version!r}
from . import version, cuda
'''
_VERSION = "cuda = {cuda!r}\n"
_CUDA = '''
_ARCHS = {archs!r}
_DEVICES = {devices!r}
from . import nccl

def get_arch_list():
    return list(_ARCHS)

def is_available():
    return {available!r}

def device_count():
    return len(_DEVICES)

def get_device_name(i):
    return _DEVICES[i][0]

def get_device_capability(i):
    return tuple(_DEVICES[i][1])
'''
_NCCL = '''
def version():
    if {nccl!r} is None:
        raise AttributeError("module 'torch._C' has no attribute '_nccl_version'")
    return {nccl!r}
'''


def write_fake_torch(
    root: Path,
    version: str = "2.5.1+cu124",
    cuda: str | None = "12.4",
    archs: tuple[str, ...] = ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
    devices: tuple[tuple[str, tuple[int, int]], ...] = (),
    available: bool | None = None,
    nccl: tuple[int, int, int] | None = (2, 21, 5),
) -> Path:
    """Returns ``root`` (the directory to put on PYTHONPATH)."""
    pkg = root / "torch"
    (pkg / "cuda").mkdir(parents=True)
    is_available = bool(devices) if available is None else available
    (pkg / "__init__.py").write_text(_INIT.format(version=version))
    (pkg / "version.py").write_text(_VERSION.format(cuda=cuda))
    (pkg / "cuda" / "__init__.py").write_text(
        _CUDA.format(archs=list(archs), devices=[(n, list(c)) for n, c in devices], available=is_available))
    (pkg / "cuda" / "nccl.py").write_text(_NCCL.format(nccl=nccl))
    return root
