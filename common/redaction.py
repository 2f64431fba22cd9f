"""Reversible redaction: secrets are replaced by stable placeholders before anything reaches a model
(a local server may log prompts too), and restored in what the user sees.

What is a secret is the one table in ``common.secret_shapes`` (tokens of Hugging Face, OpenAI, Anthropic, Slack,
GitHub, GitLab, AWS, Google, W&B and many more; JWTs; ``Authorization``, ``Bearer`` and cookie values; passwords
in URLs and on command lines; presigned-URL signatures; private keys; values of secret-looking names).
``strict`` also masks where the job ran: host names under a public suffix and cloud-internal names
(``common.hostnames``), IPv4 and IPv6 addresses, node names and home-directory paths. Lines longer than
``common.secrets.LINE_CAP`` are cut first (linear time).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from common.secrets import PLACEHOLDER, scan

Mode = Literal["default", "strict"]


@dataclass
class Redactor:
    mode: Mode = "default"
    _forward: dict[str, str] = field(default_factory=dict)
    _backward: dict[str, str] = field(default_factory=dict)
    _counts: dict[str, int] = field(default_factory=dict)

    def _placeholder(self, kind: str, secret: str) -> str:
        if secret in self._forward:
            return self._forward[secret]
        self._counts[kind] = self._counts.get(kind, 0) + 1
        token = f"[{kind}_{self._counts[kind]}]"
        self._forward[secret] = token
        self._backward[token] = secret
        return token

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced by a placeholder (the same secret, the same placeholder)."""
        return scan(text, self._placeholder, strict=self.mode == "strict")

    def restore(self, text: str) -> str:
        """Placeholders back to the user's own values (for what the user sees, never for a model)."""
        if not self._backward or not text:
            return text
        for _ in range(3):  # a secret that held a placeholder (a URL password inside a token=) comes back whole
            restored = PLACEHOLDER.sub(lambda m: self._backward.get(m.group(0), m.group(0)), text)
            if restored == text:
                break
            text = restored
        return text

    def secrets(self) -> list[str]:
        return list(self._forward)
