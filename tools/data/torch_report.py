"""Prints, as one JSON line, what the user's interpreter says about torch and CUDA ("torch", read by the
torch_cuda_compat probe), the installed versions of the training stack ("versions", read by the versions
probe), torch's CUDA for the toolkit check ("toolkit", cuda_toolkit) and what DeepSpeed's ds_report reads
("deepspeed", deepspeed_ops: its files are read, it is not imported). One script so a probe sweep starts the
user's interpreter and imports torch once.

Run by traindoc in the user's own interpreter; read-only, standard library plus torch, Python 3.8 compatible."""

import ast
import ctypes
import importlib.util
import json
import os
import platform
import re
import sys

try:
    from importlib import metadata
except ImportError:  # Python < 3.8
    metadata = None  # type: ignore[assignment]

PACKAGES = ["torch", "torchvision", "torchaudio", "deepspeed", "transformers", "accelerate", "vllm", "flash-attn",
            "xformers", "triton", "nvidia-nccl-cu12", "nvidia-nccl-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn-cu13",
            "ninja", "nvidia-cutlass", "numpy"]
_REQ = re.compile(r"^\s*torch\s*(\[[^\]]*\])?\s*(?P<spec>[^;]*)(;\s*(?P<marker>.*))?$")


# -- torch and CUDA -------------------------------------------------------------

def driver_cuda_version():
    """The newest CUDA the installed driver supports (cuDriverGetVersion), e.g. 12040; None without a driver."""
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        version = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(version)) == 0:
            return version.value
    return None


def import_torch():
    """(torch module or None, the import error or None)."""
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - any import failure is the fact we report
        return None, exc
    return torch, None


def nccl_version(torch):
    import torch.cuda.nccl  # noqa: F401 - the submodule must be loaded for torch.cuda.nccl

    v = torch.cuda.nccl.version()
    return ".".join(str(p) for p in v) if isinstance(v, tuple) else str(v)


def torch_report(torch, error):
    report = {"python": platform.python_version(), "executable": sys.executable,
              "driver_cuda": driver_cuda_version()}
    if torch is None:
        report["torch_error"] = f"{type(error).__name__}: {error}"
        report["torch_missing"] = isinstance(error, ModuleNotFoundError) and error.name == "torch"
        return report
    report["torch"] = str(torch.__version__)
    report["torch_cuda"] = getattr(torch.version, "cuda", None)
    report["arch_list"] = []
    report["devices"] = []
    try:
        report["arch_list"] = list(torch.cuda.get_arch_list())
    except Exception as exc:  # noqa: BLE001
        report["arch_list_error"] = f"{type(exc).__name__}: {exc}"
    try:
        report["is_available"] = bool(torch.cuda.is_available())
        report["device_count"] = int(torch.cuda.device_count())
        for index in range(report["device_count"]):
            major, minor = torch.cuda.get_device_capability(index)
            report["devices"].append({"index": index, "name": torch.cuda.get_device_name(index),
                                      "capability": [int(major), int(minor)]})
    except Exception as exc:  # noqa: BLE001
        report["cuda_error"] = f"{type(exc).__name__}: {exc}"
    try:
        report["nccl"] = nccl_version(torch)
    except Exception:  # noqa: BLE001 - CPU builds have no NCCL
        report["nccl"] = None
    try:  # None on a CPU build; torch raises "cuDNN version incompatibility" when the loaded one does not fit
        import torch.backends.cudnn

        report["cudnn"] = torch.backends.cudnn.version()
    except Exception as exc:  # noqa: BLE001
        report["cudnn"] = None
        report["cudnn_error"] = f"{type(exc).__name__}: {exc}"
    return report


# -- toolkit and DeepSpeed --------------------------------------------------------

def toolkit_report(torch):
    return {"torch": str(torch.__version__) if torch else None,
            "torch_cuda": getattr(getattr(torch, "version", None), "cuda", None) if torch else None}


def _literals(path):
    """The module-level ``NAME = <literal>`` assignments of a Python file, read without running it."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                found[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return found


def deepspeed_report(torch):
    """What ds_report shows, from DeepSpeed's files (git_version_info_installed.py, op_builder/*.py): importing
    deepspeed would probe every op, and some probes compile a test program."""
    report = toolkit_report(torch)
    spec = importlib.util.find_spec("deepspeed")  # a top-level find_spec does not import the package
    if spec is None or not spec.submodule_search_locations:
        report["installed"] = False
        return report
    root = list(spec.submodule_search_locations)[0]
    report.update({"installed": True, "path": root, "version": version("deepspeed"), "ops": [],
                   "packages": {name: version(name) for name in ("triton", "nvidia-cutlass")}})
    info = os.path.join(root, "git_version_info_installed.py")
    if os.path.isfile(info):
        try:
            values = _literals(info)
        except (OSError, SyntaxError) as exc:
            report["info_error"] = f"{type(exc).__name__}: {exc}"
        else:
            report["installed_ops"] = {k: bool(v) for k, v in dict(values.get("installed_ops") or {}).items()}
            report["built_with"] = dict(values.get("torch_info") or {})
            report["accelerator"] = values.get("accelerator_name")
    builders = os.path.join(root, "ops", "op_builder")
    try:
        names = sorted(n for n in os.listdir(builders) if n.endswith(".py") and n not in ("all_ops.py", "builder.py", "__init__.py"))
    except OSError:
        names = []
    for name in names:
        try:
            tree = ast.parse(open(os.path.join(builders, name), encoding="utf-8").read())
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if (isinstance(item, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "NAME" for t in item.targets)
                            and isinstance(item.value, ast.Constant) and isinstance(item.value.value, str)):
                        report["ops"].append(item.value.value)
    report["ops"] = sorted(set(report["ops"]))
    return report


# -- package versions -----------------------------------------------------------

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


def versions_report(torch, error):
    report = {"python": platform.python_version(), "executable": sys.executable, "packages": {}}
    if metadata is None:
        report["error"] = "importlib.metadata unavailable (Python < 3.8)"
        return report
    for name in PACKAGES:
        report["packages"][name] = version(name)
    torch_version = report["packages"].get("torch")
    report["torch_pins"] = torch_pins(torch_version) if torch_version else []
    report["nccl"] = None
    report["torch_cuda"] = None
    if torch_version:
        try:
            if torch is None:
                raise error
            report["torch_cuda"] = torch.version.cuda
            report["nccl"] = nccl_version(torch)
        except Exception as exc:  # noqa: BLE001 - CPU builds have no NCCL
            report["nccl_error"] = f"{type(exc).__name__}: {exc}"
    return report


def main():
    torch, error = import_torch()
    print(json.dumps({"torch": torch_report(torch, error), "versions": versions_report(torch, error),
                      "toolkit": toolkit_report(torch), "deepspeed": deepspeed_report(torch)}))


if __name__ == "__main__":
    main()
