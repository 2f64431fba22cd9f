from types import SimpleNamespace

import pytest

from tools import disk_and_memory
from tools.base import ProbeContext, Status

GIB = 1024**3
MEMINFO_OK = "MemTotal:       65536000 kB\nMemFree:  1000 kB\nMemAvailable:   50000000 kB\n"
MEMINFO_LOW = "MemTotal:       65536000 kB\nMemAvailable:   1000000 kB\n"


def fs(total_gib, free_gib):
    return SimpleNamespace(f_frsize=4096, f_blocks=int(total_gib * GIB / 4096), f_bavail=int(free_gib * GIB / 4096))


@pytest.mark.parametrize(
    ("disk", "shm", "meminfo", "expected"),
    [
        (fs(1000, 500), fs(32, 32), MEMINFO_OK, []),
        (fs(1000, 8), fs(32, 32), MEMINFO_OK, ["DISK_NEARLY_FULL"]),  # under 10 GiB
        (fs(10000, 400), fs(32, 32), MEMINFO_OK, ["DISK_NEARLY_FULL"]),  # under 5 %
        (fs(1000, 500), fs(0.0625, 0.06), MEMINFO_OK, ["SHM_TOO_SMALL"]),  # docker's 64 MB
        (fs(1000, 500), fs(32, 32), MEMINFO_LOW, ["LOW_MEMORY"]),
    ],
)
def test_rows(tmp_path, disk, shm, meminfo, expected):
    def statvfs(path):
        return shm if path == "/dev/shm" else disk

    ctx = ProbeContext(output_dirs=(tmp_path / "not-yet" / "ckpt",), environ={})
    result = disk_and_memory.probe(ctx, statvfs=statvfs, meminfo=lambda: meminfo)
    assert sorted(f.code for f in result.findings) == expected
    assert result.status == (Status.PROBLEM if expected else Status.OK)
    if "SHM_TOO_SMALL" in expected:
        assert "--shm-size=16g" in result.findings[0].fix and "--ipc=host" in result.findings[0].fix
    assert result.evidence["disks"][str(tmp_path / "not-yet" / "ckpt")]["checked"] == str(tmp_path)
