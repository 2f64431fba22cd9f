"""The built-in documents are the seed documents, byte for byte."""

from __future__ import annotations

import pytest

from corpus import BUILTIN_DIR

SEEDS = BUILTIN_DIR.parent.parent / "shared" / "seeds"


@pytest.mark.skipif(not SEEDS.is_dir(), reason="../shared/seeds is not checked out next to the project")
def test_builtin_corpus_is_byte_identical_to_the_seeds():
    seeds = sorted(SEEDS.iterdir())
    assert len(seeds) == 5
    for seed in seeds:
        ours = BUILTIN_DIR / seed.name
        assert ours.is_file(), f"{seed.name} missing from corpus/"
        assert ours.read_bytes() == seed.read_bytes(), f"{seed.name} differs from the seed"
    builtin = {p.name for p in BUILTIN_DIR.iterdir() if p.suffix in (".txt", ".md", ".rst")}
    assert builtin == {s.name for s in seeds}

