"""The open-file limit is its own kind (runbook too_many_open_files): each line Python and PyTorch print when a
process runs out of descriptors picks the runbook alone; a DataLoader worker that crashed, /dev/shm too small and a
full disk keep their own. The messages are read from the installed torch and CPython, and the mechanism and the
fixes the runbook names are reproduced on the CPU: a DataLoader whose batches the loop keeps fails under a low
limit, the file_system strategy and one tensor per field get through it, each kept tensor holds a deleted /dev/shm
file until it is dropped, and a spawned worker takes the strategy only from worker_init_fn."""

from __future__ import annotations

import ast
import errno
import inspect
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from runbook_messages import assert_a_line_per_message, assert_picks

from runbooks.catalog import runbooks
from runbooks.choose import for_lines
from runbooks.registry import signalled

KIND = "too_many_open_files"

# One real-shaped line per message in the runbook's front matter (the same order).
LINES = [
    "RuntimeError: Too many open files. Communication with the workers is no longer possible. Please increase the "
    "limit using `ulimit -n` in the shell or change the sharing strategy by calling "
    "`torch.multiprocessing.set_sharing_strategy('file_system')` at the beginning of your code",
    "RuntimeError: received 0 items of ancdata",
    "OSError: [Errno 24] Too many open files: '/data/shards/part-01234.parquet'",
    "RuntimeError: unable to open shared memory object </torch_4242_1234567890_17> in read-write mode: Too many open "
    "files (24)",
]

NEIGHBOURS = {
    "dataloader_worker": "RuntimeError: DataLoader worker (pid 9943) is killed by signal: Killed.",
    "dev_shm": "RuntimeError: unable to write to file </torch_9931_3149260800_0>: No space left on device (28)",
    "disk_full": "OSError: [Errno 28] No space left on device",
}


def test_every_message_has_a_line_here_and_both_languages_list_the_same_ones() -> None:
    assert_a_line_per_message(KIND, LINES)


@pytest.mark.parametrize("line", LINES)
def test_each_line_picks_the_runbook(line: str) -> None:
    assert_picks(KIND, [line])


@pytest.mark.parametrize(("kind", "line"), NEIGHBOURS.items())
def test_a_neighbouring_failure_keeps_its_own_runbook(kind: str, line: str) -> None:
    chosen = for_lines([line])
    assert chosen is not None and chosen.kind == kind, (line, chosen and chosen.kind)


def test_the_messages_are_the_ones_torch_and_python_print() -> None:
    torch = pytest.importorskip("torch")
    import multiprocessing.reduction

    import torch.utils.data.dataloader as dataloader

    messages = runbooks()[(KIND, "en")].messages
    literals = [node.value for node in ast.walk(ast.parse(inspect.getsource(dataloader)))
                if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    assert any(messages[0] in literal for literal in literals)
    assert "received %d items of ancdata" in inspect.getsource(multiprocessing.reduction)
    assert messages[2] == str(OSError(errno.EMFILE, os.strerror(errno.EMFILE)))
    assert torch.multiprocessing.get_sharing_strategy() in ("file_descriptor", "file_system")


def test_a_signal_tells_it_from_dev_shm() -> None:
    assert signalled(KIND, "DataLoader 报错，ulimit -n 只有 1024")
    assert signalled(KIND, "文件描述符用完了")
    assert signalled(KIND, "Too many files open after 500 epochs")  # the words as askers retell the message
    assert signalled(KIND, "docker run --ulimit memlock=-1 --shm-size=16g") is None  # /dev/shm's flags, not nofile


# --- the mechanism and the fixes, on the CPU ------------------------------------------------------------------------

_JOB = textwrap.dedent("""
    import os, resource, sys, torch
    from torch.utils.data import DataLoader, Dataset

    mode = sys.argv[1]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (128, hard))
    if mode == "file_system":
        torch.multiprocessing.set_sharing_strategy("file_system")

    class Many(Dataset):  # a sample of 8 small tensors: 8 descriptors each under file_descriptor
        def __len__(self): return 200
        def __getitem__(self, i): return [torch.zeros(4) for _ in range(8)]

    class Stacked(Dataset):  # the same values as one tensor
        def __len__(self): return 200
        def __getitem__(self, i): return torch.zeros(8, 4)

    dataset, collate = (Stacked(), None) if mode == "stacked" else (Many(), lambda samples: samples)
    if mode == "count":  # what check 3 lists while 12 samples are kept: one deleted /dev/shm file per tensor
        kept = [b for _, b in zip(range(3), DataLoader(dataset, batch_size=4, num_workers=1, collate_fn=collate))]
        def shared():
            links = []
            for fd in os.listdir("/proc/self/fd"):
                try:
                    links.append(os.readlink(f"/proc/self/fd/{fd}"))
                except OSError:  # the descriptor listdir itself used, closed since
                    pass
            return sum(1 for t in links if t.startswith("/dev/shm/torch_") and t.endswith("(deleted)"))
        held = shared()
        kept.clear()
        print(held, shared())
        sys.exit(0)
    kept = []
    for batch in DataLoader(dataset, batch_size=4, num_workers=2, collate_fn=collate):
        if mode == "clone":
            batch = [[t.clone() for t in sample] for sample in batch]
        kept.append(batch)  # the loop keeps every batch, as code that collects outputs across an epoch does
    print("done", mode, len(kept), len(os.listdir("/proc/self/fd")))
""")


def _run(tmp_path: Path, mode: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "job.py"
    script.write_text(_JOB, encoding="utf-8")
    return subprocess.run([sys.executable, str(script), mode], cwd=tmp_path, capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def linux_torch() -> None:
    pytest.importorskip("torch")
    if not sys.platform.startswith("linux"):
        pytest.skip("file descriptors are shared this way on Linux")


@pytest.mark.usefixtures("linux_torch")
def test_kept_batches_run_out_of_descriptors_and_the_last_line_picks_the_runbook(tmp_path: Path) -> None:
    done = _run(tmp_path, "default")
    assert done.returncode != 0, done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert any(message in last for message in runbooks()[(KIND, "en")].messages), done.stderr[-800:]
    assert_picks(KIND, [last])


@pytest.mark.usefixtures("linux_torch")
@pytest.mark.parametrize("mode", ["file_system", "stacked"])
def test_each_fix_gets_through_under_the_same_limit(tmp_path: Path, mode: str) -> None:
    done = _run(tmp_path, mode)
    assert done.returncode == 0 and done.stdout.startswith(f"done {mode} 50"), done.stderr[-800:]


@pytest.mark.usefixtures("linux_torch")
def test_the_descriptors_are_deleted_shm_files_while_the_tensors_live(tmp_path: Path) -> None:
    done = _run(tmp_path, "count")
    assert done.returncode == 0, done.stderr[-800:]
    held, after = (int(n) for n in done.stdout.split())
    assert held >= 96 and after < held, done.stdout  # 12 kept samples x 8 tensors, as check 3 shows; freed when dropped


_SPAWN = textwrap.dedent("""
    import torch.multiprocessing as mp
    from torch.utils.data import DataLoader, Dataset

    class Strategy(Dataset):  # sample i is fetched by worker i: worker 0 as spawned, worker 1 after worker_init_fn
        def __len__(self): return 2
        def __getitem__(self, i): return mp.get_sharing_strategy()

    def use_file_system(worker_id):
        if worker_id == 1:
            mp.set_sharing_strategy("file_system")

    if __name__ == "__main__":
        mp.set_sharing_strategy("file_system")
        loader = DataLoader(Strategy(), batch_size=None, num_workers=2, multiprocessing_context="spawn",
                            worker_init_fn=use_file_system)
        print(*loader)
""")


@pytest.mark.usefixtures("linux_torch")
def test_a_spawned_worker_starts_with_the_default_strategy_unless_worker_init_fn_sets_it(tmp_path: Path) -> None:
    script = tmp_path / "spawn_job.py"
    script.write_text(_SPAWN, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-800:]
    assert done.stdout.split() == ["file_descriptor", "file_system"]
