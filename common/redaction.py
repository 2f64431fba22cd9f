"""Reversible redaction: secrets are replaced by stable placeholders before anything reaches a model
(a local server may log prompts too), and restored in what the user sees.

Default mode masks credentials: Hugging Face, OpenAI, Anthropic, Slack, W&B, AWS, GitHub and GitLab
tokens, passwords in URLs, private keys, and values of secret-looking assignments. ``strict`` also
masks hostnames, IP addresses and home-directory paths.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

Mode = Literal["default", "strict"]

PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)")
TOKENS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("ANTHROPIC_KEY", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}")),
    ("OPENAI_KEY", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}")),
    ("HF_TOKEN", re.compile(r"\bhf_[A-Za-z0-9]{20,}")),
    ("SLACK_TOKEN", re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}|\bxapp-[A-Za-z0-9\-]{10,}")),
    ("SLACK_WEBHOOK", re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+")),
    ("GITHUB_TOKEN", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}")),
    ("GITLAB_TOKEN", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}")),
    ("AWS_ACCESS_KEY", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("WANDB_KEY", re.compile(r"(?<=wandb login )(?:local-)?[0-9a-f]{40}\b|(?<=api\.wandb\.ai\n  password )[0-9a-f]{40}")),
)
# NAME=value / --name value / "name": "value" where the name says secret.
ASSIGNMENT = re.compile(
    r"(?P<prefix>(?:\b[A-Za-z0-9_]*(?:TOKEN|API_KEY|APIKEY|SECRET|PASSWORD|PASSWD|ACCESS_KEY)[A-Za-z0-9_]*"
    r"|--?[a-z0-9_\-]*(?:token|api[-_]?key|secret|password|passwd)[a-z0-9_\-]*)"
    r"[\"']?\s*(?:=|:|\s)\s*[\"']?)(?P<value>(?!\[[A-Z_]+_\d+\])[^\s\"',;`)\]}]{6,})",
    re.IGNORECASE,
)
URL_PASSWORD = re.compile(r"(?P<prefix>\b[a-z][a-z0-9+.\-]{0,31}://[^/\s:@]{1,256}:)(?P<value>[^/\s@]{1,256})(?=@)", re.IGNORECASE)
IP_ADDRESS = re.compile(r"\b(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)\b")
HOME_PATH = re.compile(r"(?:/home/|/Users/)[^/\s:\"']+|~[^/\s:\"']*(?=/)|/root\b")
HOSTNAME = re.compile(
    r"\b(?=[a-z0-9\-]*[a-z])[a-z0-9](?:[a-z0-9\-]{0,61}[a-z0-9])?"
    r"(?:\.(?:[a-z0-9](?:[a-z0-9\-]{0,61}[a-z0-9])?))*\.(?:com|net|org|io|ai|internal|local|lan|corp|cluster|cn|dev)\b"
    r"|\b(?:node|gpu|worker|host|compute|dgx)[-_]?\d+[a-z0-9\-]*\b",
    re.IGNORECASE,
)
PLACEHOLDER = re.compile(r"\[(?:[A-Z_]+)_\d+\]")


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

    def _sub(self, pattern: re.Pattern[str], kind: str, text: str, group: str | None = None) -> str:
        def swap(match: re.Match[str]) -> str:
            if group is None:
                return self._placeholder(kind, match.group(0))
            value = match.group(group)
            if PLACEHOLDER.fullmatch(value):
                return match.group(0)
            start, end = match.span(group)
            whole_start = match.start()
            return match.group(0)[: start - whole_start] + self._placeholder(kind, value) + match.group(0)[end - whole_start :]

        return pattern.sub(swap, text)

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced by a placeholder (the same secret, the same placeholder)."""
        if not text:
            return text
        text = self._sub(PRIVATE_KEY, "PRIVATE_KEY", text)
        for kind, pattern in TOKENS:
            text = self._sub(pattern, kind, text)
        text = self._sub(URL_PASSWORD, "URL_PASSWORD", text, "value")
        text = self._sub(ASSIGNMENT, "SECRET", text, "value")
        if self.mode == "strict":
            text = self._sub(IP_ADDRESS, "IP", text)
            text = self._sub(HOME_PATH, "HOME", text)
            text = self._sub(HOSTNAME, "HOST", text)
        return text

    def restore(self, text: str) -> str:
        """Placeholders back to the user's own values (for what the user sees, never for a model)."""
        if not self._backward or not text:
            return text
        return PLACEHOLDER.sub(lambda m: self._backward.get(m.group(0), m.group(0)), text)

    def secrets(self) -> list[str]:
        return list(self._forward)

