"""The vectors shipped with the built-in documents cover every chunk of them (corpus.ship_vectors).

A runbook edited without regenerating them still answers, but every fresh install and every first `ask` then
loads the model and embeds the changed chunks (most of a minute on 2 cores) instead of indexing in seconds.
Regenerate with `python -m corpus.ship_vectors`.
"""

from __future__ import annotations

import numpy as np
import pytest

from corpus.embedding_cache import shipped_path, text_key
from corpus.ship_vectors import SHIPPED_MODELS, builtin_texts


@pytest.mark.parametrize("model", SHIPPED_MODELS)
def test_every_built_in_chunk_has_a_shipped_vector(model: str) -> None:
    texts = builtin_texts()
    assert len(texts) > 500  # the seeds, their renderings and the runbooks
    with np.load(shipped_path(model)) as shipped:
        keys = set(shipped["keys"].tolist())
    missing = [t[:80] for t in texts if text_key(model, t) not in keys]
    assert not missing, f"{len(missing)} chunks lack a shipped {model} vector (run python -m corpus.ship_vectors): {missing[:3]}"
