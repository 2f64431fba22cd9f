"""Prints what the installed torch says about CUDA, as one JSON object. Run by traindoc's torch_cuda_compat
probe in the user's own interpreter; read-only, standard library plus torch, Python 3.8 compatible."""

import ctypes
import json
import platform
import sys


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


def main():
    report = {"python": platform.python_version(), "executable": sys.executable,
              "driver_cuda": driver_cuda_version()}
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - any import failure is the fact we report
        report["torch_error"] = f"{type(exc).__name__}: {exc}"
        report["torch_missing"] = isinstance(exc, ModuleNotFoundError) and exc.name == "torch"
        print(json.dumps(report))
        return
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
        import torch.cuda.nccl

        version = torch.cuda.nccl.version()
        report["nccl"] = ".".join(str(v) for v in version) if isinstance(version, tuple) else str(version)
    except Exception:  # noqa: BLE001 - CPU builds have no NCCL
        report["nccl"] = None
    print(json.dumps(report))


if __name__ == "__main__":
    main()
