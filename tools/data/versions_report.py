"""Prints installed versions of the training stack as JSON, and which installed packages pin torch to a version
other than the installed one. Run by traindoc's versions probe in the user's interpreter; standard library
only, except torch for the NCCL version it was built with. Python 3.8 compatible."""

import json
import platform
import re
import sys

try:
    from importlib import metadata
except ImportError:  # Python < 3.8
    metadata = None

PACKAGES = ["torch", "torchvision", "torchaudio", "deepspeed", "transformers", "accelerate", "vllm", "flash-attn",
            "xformers", "triton", "nvidia-nccl-cu12", "nvidia-nccl-cu13", "numpy"]
_REQ = re.compile(r"^\s*torch\s*(\[[^\]]*\])?\s*(?P<spec>[^;]*)(;\s*(?P<marker>.*))?$")


def version(name):
    try:
        return metadata.version(name)
    except Exception:  # noqa: BLE001 - PackageNotFoundError, broken metadata
        return None


def _key(text):
    parts = re.findall(r"\d+", text.split("+")[0])
    return tuple(int(p) for p in parts[:3])


def satisfies(installed, spec):
    """A small subset of PEP 440: comma-separated ==, !=, >=, <=, >, < and ==X.* clauses."""
    have = _key(installed)
    for clause in [c.strip() for c in spec.split(",") if c.strip()]:
        m = re.match(r"(==|!=|>=|<=|>|<|~=)\s*(\S+)", clause)
        if not m:
            continue
        op, want = m.group(1), m.group(2)
        if want.endswith(".*"):
            prefix = _key(want[:-2])
            ok = have[: len(prefix)] == prefix
            ok = ok if op == "==" else not ok
        else:
            w = _key(want)
            n = max(len(have), len(w))
            h, w = have + (0,) * (n - len(have)), w + (0,) * (n - len(w))
            ok = {"==": h == w, "!=": h != w, ">=": h >= w, "<=": h <= w, ">": h > w, "<": h < w, "~=": h >= w}[op]
        if not ok:
            return False
    return True


def torch_pins(torch_version):
    conflicts = []
    for name in PACKAGES:
        if name == "torch" or version(name) is None:
            continue
        for req in metadata.requires(name) or []:
            m = _REQ.match(req)
            if not m or (m.group("marker") and "extra" in m.group("marker")):
                continue
            spec = m.group("spec").strip().strip("()")
            if spec and not satisfies(torch_version, spec):
                conflicts.append({"package": name, "version": version(name), "requires": "torch" + spec})
    return conflicts


def main():
    report = {"python": platform.python_version(), "executable": sys.executable, "packages": {}}
    if metadata is None:
        report["error"] = "importlib.metadata unavailable (Python < 3.8)"
        print(json.dumps(report))
        return
    for name in PACKAGES:
        report["packages"][name] = version(name)
    torch_version = report["packages"].get("torch")
    report["torch_pins"] = torch_pins(torch_version) if torch_version else []
    report["nccl"] = None
    report["torch_cuda"] = None
    if torch_version:
        try:
            import torch
            import torch.cuda.nccl

            report["torch_cuda"] = torch.version.cuda
            v = torch.cuda.nccl.version()
            report["nccl"] = ".".join(str(p) for p in v) if isinstance(v, tuple) else str(v)
        except Exception as exc:  # noqa: BLE001 - CPU builds have no NCCL
            report["nccl_error"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(report))


if __name__ == "__main__":
    main()
