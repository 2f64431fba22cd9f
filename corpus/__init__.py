"""The knowledge base: troubleshooting documents (the .txt/.md files here), chunking, indexing, retrieval."""

from pathlib import Path

BUILTIN_DIR = Path(__file__).resolve().parent
