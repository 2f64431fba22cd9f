"""Masks secrets in environment variables, command lines, bundles and free text with ``***`` (the shapes are
the one table in ``common.secret_shapes``; values longer than a line are cut first, so masking is linear)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import fields, is_dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from common.secrets import MASK, mask, secret_name

if TYPE_CHECKING:
    from agent.answer import Answer
    from tools.base import ProbeResult

Record = TypeVar("Record")

_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
# Non-secret names that merely contain a secret-looking word.
_NOT_SECRET = re.compile(r"^(KEYBOARD|XKB_|SSH_AUTH_SOCK$|.*_KEYMAP$|TOKENIZERS_PARALLELISM$|AUTHOR)", re.IGNORECASE)

__all__ = ["MASK", "is_secret_name", "mask_answer", "mask_environ", "mask_json", "mask_text", "mask_value", "masked"]


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


def mask_answer(answer: Answer) -> Answer:
    """An answer as it may be pasted elsewhere (``ask --format markdown``): every text it shows masked, before
    anything escapes it for Markdown (an escaped ``https\\://u:p\\@h`` would no longer read as a password)."""
    return replace(answer, question=mask(answer.question), answer=mask(answer.answer), brief=mask(answer.brief),
                   notice=mask(answer.notice) if answer.notice else answer.notice,
                   citations=[_strings_masked(c) for c in answer.citations],
                   findings=[_strings_masked(f) for f in answer.findings],
                   verdict=_strings_masked(answer.verdict) if is_dataclass(answer.verdict) else answer.verdict)


def _strings_masked(record: Record) -> Record:
    """A frozen record (a citation, a finding, a verdict) with every text field masked."""
    changes = {f.name: mask(value) for f in fields(record) if f.init  # type: ignore[arg-type]
               and isinstance(value := getattr(record, f.name), str) and value}
    return replace(record, **changes) if changes else record  # type: ignore[type-var]
