"""Masks secrets in environment variables, command lines, bundles and free text with ``***`` (the shapes are
the one table in ``common.secret_shapes``; values longer than a line are cut first, so masking is linear)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from common.secrets import MASK, mask, secret_name

if TYPE_CHECKING:
    from tools.base import ProbeResult

_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
# Non-secret names that merely contain a secret-looking word.
_NOT_SECRET = re.compile(r"^(KEYBOARD|XKB_|SSH_AUTH_SOCK$|.*_KEYMAP$|TOKENIZERS_PARALLELISM$|AUTHOR)", re.IGNORECASE)

__all__ = ["MASK", "is_secret_name", "mask_environ", "mask_json", "mask_text", "mask_value", "masked"]


def is_secret_name(name: str) -> bool:
    """An environment variable or JSON key whose value is secret as a whole (HF_TOKEN, AWS_SECRET_ACCESS_KEY,
    SESSION_COOKIE); broader than a name in free text, where ``key`` alone says little."""
    return (bool(_SECRET_NAME.search(name)) and not _NOT_SECRET.match(name)) or secret_name(name)


def mask_value(value: str, name: str = "") -> str:
    """Masks the whole value when its name looks secret, else only the secrets inside it (a value longer than a
    line is cut first, the cut shown)."""
    if name and is_secret_name(name):
        return MASK if value else value
    return mask(value)


def mask_text(text: str) -> str:
    """Masks tokens and ``--api-key VALUE`` / ``PASSWORD=VALUE`` style assignments in free text."""
    return mask(text)


def mask_environ(environ: Mapping[str, str]) -> dict[str, str]:
    return {name: mask_value(value, name) for name, value in environ.items()}


def mask_json(data: Any) -> Any:
    """Masks a JSON-like structure: values under secret-looking keys and secrets in strings anywhere."""
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


def masked(result: ProbeResult) -> ProbeResult:
    """A probe's result as it may leave the probe: summary, findings and evidence masked (a finding quotes the
    raw value it judged, ``NCCL_SOCKET_IFNAME=<what was set>``)."""
    findings = tuple(replace(f, summary=mask(f.summary), evidence=mask(f.evidence), fix=mask(f.fix)) for f in result.findings)
    return replace(result, summary=mask(result.summary), findings=findings, evidence=mask_json(result.evidence))
