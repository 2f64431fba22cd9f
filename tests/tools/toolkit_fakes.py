"""Stand-ins for what the toolchain probes read, built from the real formats in data/gpu-h100: an `nvcc` and a
`gcc` that print what the real ones print, and an installed DeepSpeed tree (its ops named as ds_report lists them)."""

from __future__ import annotations

import re
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "gpu-h100"
NVCC_OUTPUT = ("nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\n"
               "Built on Wed_Aug_20_01:58:59_PM_PDT_2025\nCuda compilation tools, release {release}, V{release}.88\n"
               "Build cuda_{release}.r{release}/compiler.36424714_0\n")


def script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n/bin/cat <<'END'\n" + text + "END\n", encoding="utf-8")
    path.chmod(0o755)
    return path


def cuda_home(root: Path, release: str) -> Path:
    """A CUDA_HOME whose bin/nvcc prints the real `nvcc --version` text for ``release``."""
    script(root / "bin" / "nvcc", NVCC_OUTPUT.format(release=release))
    return root


def ds_report_ops() -> list[str]:
    """The op names in the real ds_report's table (`async_io ....... [NO] ....... [NO]`)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", (DATA / "ds_report.txt").read_text(encoding="utf-8"))
    return [m.group(1) for m in re.finditer(r"^(\w+) \.+ \[(?:YES|NO)\]", text, re.MULTILINE)]


def write_deepspeed(site: Path, ops: list[str], installed: dict[str, bool], torch_info: dict[str, str],
                    version: str = "0.19.8") -> Path:
    """An installed DeepSpeed as pip leaves it: git_version_info_installed.py and ops/op_builder/<op>.py."""
    package = site / "deepspeed"
    builders = package / "ops" / "op_builder"
    builders.mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('traindoc must not import deepspeed')\n")
    (package / "git_version_info_installed.py").write_text(
        f"version={version!r}\ngit_hash='unknown'\ngit_branch='unknown'\ninstalled_ops={installed!r}\n"
        f"accelerator_name='cuda'\ntorch_info={torch_info!r}\n")
    (builders / "builder.py").write_text("class OpBuilder:\n    NAME = 'not_an_op'\n")
    for op in ops:
        (builders / f"{op}.py").write_text(f"from .builder import OpBuilder\n\n\nclass B(OpBuilder):\n    NAME = {op!r}\n")
    dist = site / f"deepspeed-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: deepspeed\nVersion: {version}\n")
    return site
