"""The retriever takes its best chunks from a partial sort: the same chunks, in the same order (ties: lower index
first), as a stable sort of every chunk's score would give."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from corpus.retrieval import Retriever

scores = st.lists(st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.7, 0.9]) | st.floats(0, 1, width=32), min_size=1,
                  max_size=400)


@settings(max_examples=300, deadline=None)
@given(values=scores, count=st.integers(1, 120))
def test_leading_chunks_are_the_stable_sorts_opening(values: list[float], count: int) -> None:
    fused = np.array(values, dtype=np.float32)
    leading = Retriever._leading(fused, count)
    full = np.argsort(-fused, kind="stable")
    if len(fused) > count:
        full = full[fused[full] > 0]
        assert len(leading) >= min(count, len(full))
    assert leading.tolist() == full[: len(leading)].tolist()
