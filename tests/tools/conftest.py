import os
import sys
from pathlib import Path

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a real NVIDIA GPU (skipped elsewhere)")


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test touches the real home directory or caches."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.fixture
def target_python() -> str:
    return sys.executable


@pytest.fixture
def base_env() -> dict[str, str]:
    """A minimal environment for the user's interpreter: PATH only, nothing from the developer's shell."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
