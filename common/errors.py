"""traindoc's exceptions. Foreign errors are translated once, at the boundary, ``raise ... from``.

    TraindocError            one clear line for the user, plus an optional hint
    ├── UsageError           bad command-line input (exit 2)
    ├── ConfigError          a setting that cannot work (model, URL, path)
    │   └── SettingError         a TRAINDOC_* value outside what it accepts (exit 2, as bad usage)
    ├── InputError           a file the user named cannot be read as text
    ├── DiskFullError        no space left where traindoc writes (the index is not damaged: nothing to rebuild)
    └── IndexStoreError      the knowledge base cannot be opened, built or queried
        ├── IndexMissingError    nothing indexed yet
        ├── IndexMismatchError   built with another embedding model
        └── IndexBusyError       another `traindoc index` holds the lock
"""

from __future__ import annotations


class TraindocError(Exception):
    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class UsageError(TraindocError):
    exit_code = 2


class ConfigError(TraindocError):
    pass


class SettingError(ConfigError):
    exit_code = 2


class InputError(TraindocError):
    pass


class DiskFullError(TraindocError):
    pass


class IndexStoreError(TraindocError):
    pass


class IndexMissingError(IndexStoreError):
    pass


class IndexMismatchError(IndexStoreError):
    pass


class IndexBusyError(IndexStoreError):
    pass
