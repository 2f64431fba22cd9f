"""Secret masking throughput on adversarial inputs, 10 KB to 1 MB: a quadratic pattern shows as a ratio.

Every input is text built to make a backtracking regex engine rescan: long runs of letters, of URL schemes
(``ab://``), of ``a:a@`` (URL credentials), ``-eyJ`` (JWT starts), ``token=``, ``--token ``, secret words
glued together, ``Authorization: ``, ``Bearer ``, netrc ``password`` lines, PEM headers without a key; plus a
real document and a single 1 MB line (cut to ``LINE_CAP`` first); and near-matches of every other way a shape
is found (``redis://:``, one-line netrc, PEM bodies, ``curl -u``, ``sshpass -p``, cookies, presigned-URL
signatures, open quotes, IPv6 and host names for strict mode, ...). Each is masked as the probes do
(``common.secrets.mask``) and as the model path does (``Redactor(mode="strict").redact``).

Targets: for every input, throughput at 1 MB is at least half the throughput at 100 KB (linear time keeps
the ratio near 1.0, a quadratic pattern drops it to 0.1), and every input masks at 0.25 MB/s or more (the
slowest are inputs where nearly every word is a secret or an IP address).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from _common import REPO, finish, parser, verdict

sys.path.insert(0, str(REPO))

from common.redaction import Redactor  # noqa: E402
from common.secrets import mask  # noqa: E402

SIZES = (10_000, 100_000, 1_000_000)
UNITS = {
    "letters": "a", "schemes": "ab://", "url credentials": "a:a@", "jwt starts": "-eyJ", "dotted eyJ": "eyJabcdefghij.",
    "assignments": "token=", "flags": "--token ", "secret words": "tokentoken_key", "authorization": "Authorization: ",
    "bearer": "Bearer ", "netrc": "password \n", "pem headers": "-----BEGIN PRIVATE KEY-----", "hosts": "a.", "digits": "1.",
    "empty user": "://:", "netrc one line": "machine a login ", "pem body": "MII", "base64 lines": "MII" + "A" * 61 + "\n",
    "curl": "curl -u a:", "sshpass": "sshpass -p ", "cookie": "Cookie: ", "signature": "X-Amz-Signature=",
    "open quotes": 'password="', "single quotes": "pass='a ", "ipv6": "a:", "hex colons": "ab::", "two-part suffix": "x.co.",
    "ec2 names": "ip-1-", "azure": "abc1Q~", "mailchimp": "0123456789abcdef-us1", "discord": "M", "json key": '"key": "',
}


def lines(unit: str, size: int, width: int = 2000) -> str:
    line = (unit * (width // len(unit) + 1))[:width] + "\n"
    return (line * (size // len(line) + 1))[:size]


def inputs() -> dict[str, Callable[[int], str]]:
    document = (REPO / "corpus" / "001_8c5ded5e8229fdf4.txt").read_text(encoding="utf-8")
    made: dict[str, Callable[[int], str]] = {name: (lambda size, u=unit: lines(u, size)) for name, unit in UNITS.items()}
    made["document"] = lambda size: (document * (size // len(document) + 1))[:size]
    made["one long line"] = lambda size: "a" * size
    return made


def throughput(text: str, runs: int) -> float:
    """MB/s of mask + strict redaction, the best of ``runs`` (the least disturbed by other work)."""
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        mask(text)
        Redactor(mode="strict").redact(text)
        best = min(best, time.perf_counter() - started)
    return len(text.encode()) / 1e6 / best


def main() -> int:
    args = parser(__doc__.splitlines()[0], runs=3).parse_args()
    results = []
    print(f"{'input':16}" + "".join(f"{size // 1000:>9} KB" for size in SIZES) + "   ratio 1MB/100KB")
    worst_ratio, worst_speed = ("", 9e9), ("", 9e9)
    for name, make in inputs().items():
        speeds = [throughput(make(size), args.runs if size < 1_000_000 else 2) for size in SIZES]
        ratio = speeds[2] / speeds[1]
        print(f"{name:16}" + "".join(f"{s:7.1f} MB/s" for s in speeds) + f"   {ratio:5.2f}", flush=True)
        worst_ratio = min(worst_ratio, (name, ratio), key=lambda p: p[1])
        worst_speed = min(worst_speed, (name, min(speeds)), key=lambda p: p[1])
    results.append(verdict("masking is linear", worst_ratio[1] >= 0.5,
                           f"worst throughput ratio 1 MB / 100 KB {worst_ratio[1]:.2f} ({worst_ratio[0]}; target >= 0.5)"))
    results.append(verdict("masking throughput", worst_speed[1] >= 0.25,
                           f"slowest input {worst_speed[1]:.2f} MB/s ({worst_speed[0]}; target >= 0.25 MB/s)"))
    return finish(args.strict, results)


if __name__ == "__main__":
    sys.exit(main())
