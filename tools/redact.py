"""Masks secrets in environment variables, command lines and free text before they leave a probe."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from common.redaction import PRIVATE_KEY, TOKENS

MASK = "***"

_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
# Non-secret names that merely contain a secret-looking word.
_NOT_SECRET = re.compile(r"^(KEYBOARD|XKB_|SSH_AUTH_SOCK$|.*_KEYMAP$)", re.IGNORECASE)

# One list of token shapes for the whole project (HF, OpenAI, Anthropic, Slack, GitHub, GitLab, AWS, W&B, keys).
_TOKEN_PATTERNS = re.compile("|".join(f"(?:{p.pattern})" for _, p in TOKENS) + f"|(?:{PRIVATE_KEY.pattern})")
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-z][a-z0-9+.\-]*://)[^/\s:@]+:[^/\s@]+@", re.IGNORECASE)
# ``--api-key VALUE``, ``--hf_token=VALUE`` and ``HF_TOKEN=VALUE`` on command lines.
_ASSIGNMENT = re.compile(
    r"(?P<name>--?[\w\-]*(?:token|key|secret|password|passwd)[\w\-]*)(?P<sep>=|\s+)(?P<value>\S+)"
    r"|(?P<ename>\b[A-Z0-9_]*(?:TOKEN|KEY|SECRET|PASSWORD|PASSWD)[A-Z0-9_]*)=(?P<evalue>\S+)",
    re.IGNORECASE,
)


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name)) and not _NOT_SECRET.match(name)


def mask_value(value: str, name: str = "") -> str:
    """Masks the whole value when its name looks secret, else only the token-shaped parts inside it."""
    if name and is_secret_name(name):
        return MASK if value else value
    masked = _TOKEN_PATTERNS.sub(MASK, value)
    return _URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{MASK}@", masked)


def mask_text(text: str) -> str:
    """Masks tokens and ``--api-key VALUE`` / ``PASSWORD=VALUE`` style assignments in free text."""
    return _ASSIGNMENT.sub(_mask_assignment, mask_value(text))


def _mask_assignment(match: re.Match[str]) -> str:
    if match.group("name"):
        return f"{match.group('name')}{match.group('sep')}{MASK}"
    return f"{match.group('ename')}={MASK}"


def mask_environ(environ: Mapping[str, str]) -> dict[str, str]:
    return {name: mask_value(value, name) for name, value in environ.items()}


def mask_json(data: Any) -> Any:
    """Masks a JSON-like structure: values under secret-looking keys and token-shaped strings anywhere."""
    if isinstance(data, Mapping):
        out: dict[str, Any] = {}
        for key, value in data.items():
            if isinstance(value, str) and is_secret_name(str(key)):
                out[key] = MASK if value else value
            else:
                out[key] = mask_json(value)
        return out
    if isinstance(data, list | tuple):
        return [mask_json(v) for v in data]
    if isinstance(data, str):
        return mask_value(data)
    return data
