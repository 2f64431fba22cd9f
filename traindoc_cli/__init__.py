"""The terminal front end: ``ask`` and ``traindoc`` (main.py), batch answers, ``traindoc hang`` and ``traindoc probe``,
the answer rendered for a terminal or as text to paste, and what reaches standard error (quiet.py).

Like every front end it calls the same ``ask()`` (agent/core.py) and only renders its typed answer."""

from common.regex_snapshot import install

install()  # the patterns `make` compiled once (common/regex_snapshot.py): a cold start does not compile them again
