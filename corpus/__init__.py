"""The knowledge base: troubleshooting documents (the .txt/.md files here), chunking, indexing, retrieval."""

from common.settings import BUILTIN_DIR

__all__ = ["BUILTIN_DIR"]
