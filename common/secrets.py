"""The one table of secret shapes, and the linear-time scan that finds them.

Every path that masks (the reversible redactor before a model, the probes' ``***`` masking, bundles,
Slack, the web UI, the feedback store) uses this table. Shapes follow gitleaks' rules and
detect-secrets' plugins; each row carries a fake example that the tests plant on every path.

Linear time on any text: a line longer than ``LINE_CAP`` characters is cut (the cut is shown as
``[... 98 KB cut]``) before anything is matched, and every pattern is written so that the regex engine
never rescans a run of characters: a shape may only start where the run of its body characters
starts (a look-behind), and its repetitions are possessive (``++``, ``{n,}+``). A quadratic pattern
here would let one pasted line stall every front end; ``benchmarks/bench_redact.py`` measures it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from ipaddress import ip_address

LINE_CAP = 2048  # characters per line, the cut marker included
_RUN = "A-Za-z0-9_-"  # the characters of a token's body: a shape starts only where such a run starts
START = f"(?<![{_RUN}])"


@dataclass(frozen=True)
class Shape:
    kind: str  # the placeholder's name: [KIND_1]
    pattern: str  # regex source; the secret is the group ``value`` when there is one, else the whole match
    example: str  # a fake secret of this shape, planted by the tests on every path
    secret: str = ""  # the part of ``example`` that must never be seen again (default: all of it)
    reference: str = ""  # the gitleaks rule / detect-secrets plugin it follows
    anchor: str = ""  # a regex searched in the lowered text; ``pattern`` is then matched where it ends
    before: str = ""  # a character class the match extends over backwards from the anchor (bounded)
    check: Callable[[str, str], bool] | None = None  # (name or head, whole match): does it qualify?

    @property
    def planted(self) -> str:
        return self.secret or self.example


# Words that make a name secret (HF_TOKEN, --api-key, db_password, WANDB_API_KEY).
_WORDS = r"token|secret|passw|passphrase|credential|api[-_]?key|access[-_]?key|private[-_]?key|auth[-_]?key|(?<=[_-])key\b"
_KEYWORDS = r"token|secret|passw|credential|apikey|[_-]key"  # anchors of a secret name, in the lowered text
_H40 = "0123456789abcdef0123456789abcdef01234567"
_B36 = "Zq8vR2kL5mN7pT1xW4yB6cD9fG3hJ0sA2eU5"


def _token(prefix: str, width: int, body: str) -> str:
    """A token shape: its literal ``prefix`` (``width`` characters) first, so the engine finds candidates at the
    speed of a substring search; then a look-behind that it does not continue a run of token characters."""
    return f"{prefix}(?<![{_RUN}].{{{width}}}){body}"


SHAPES: tuple[Shape, ...] = (
    # -- tokens: a prefix no ordinary word has ---------------------------------------------------------------
    Shape("PRIVATE_KEY",
          r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)",
          "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAq8vR2kL5mN7pT1xW4yB6cD9fG3h\n-----END RSA PRIVATE KEY-----",
          "MIIEowIBAAKCAQEAq8vR2kL5mN7pT1xW4yB6cD9fG3h", "gitleaks private-key; detect-secrets PrivateKeyDetector"),
    Shape("JWT", _token("eyJ", 3, r"[A-Za-z0-9_-]{5,}+\.[A-Za-z0-9_-]{8,}+(?:\.[A-Za-z0-9_-]++)?"),
          "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ0cmFpbmRvYyJ9.c2lnbmF0dXJlX29mX3RoZV90b2tlbg",
          reference="gitleaks jwt; detect-secrets JwtTokenDetector"),
    Shape("ANTHROPIC_KEY", _token("sk-ant-", 7, r"[A-Za-z0-9_-]{20,}+"), "sk-ant-api03-" + _B36 + "Qw",
          reference="gitleaks anthropic-api-key"),
    Shape("OPENAI_KEY", _token("sk-", 3, r"(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}+"), "sk-proj-" + _B36,
          reference="gitleaks openai-api-key; detect-secrets OpenAIDetector"),
    Shape("HF_TOKEN", _token("hf_", 3, r"[A-Za-z0-9]{20,}+"), "hf_" + _B36[:34], reference="gitleaks huggingface-access-token"),
    Shape("SLACK_TOKEN", _token("x(?:ox[abposr]|app)-", 5, r"[A-Za-z0-9-]{10,}+"), "xoxb-1234567890-" + _B36[:24],
          reference="gitleaks slack-bot-token; detect-secrets SlackDetector"),
    Shape("SLACK_WEBHOOK", r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{8,}+",
          "https://hooks.slack.com/services/T0000/B0000/" + _B36[:24], reference="gitleaks slack-webhook-url"),
    Shape("GITHUB_TOKEN", _token("gh[pousr]_", 4, r"[A-Za-z0-9]{20,}+") + "|" + _token("github_pat_", 11, r"[A-Za-z0-9_]{20,}+"),
          "ghp_" + _B36, reference="gitleaks github-pat; detect-secrets GitHubTokenDetector"),
    Shape("GITLAB_TOKEN", _token("gl", 2, r"(?:pat|dt|rt|ptt|cbt|oas|ft|imt|agent)-[A-Za-z0-9_-]{20,}+"),
          "glpat-" + _B36[:20], reference="gitleaks gitlab-pat; detect-secrets GitLabTokenDetector"),
    Shape("AWS_ACCESS_KEY", r"(?:AKIA|ASIA|ABIA|ACCA)(?<![A-Za-z0-9].{4})[0-9A-Z]{16}(?![0-9A-Za-z])", "AKIAZQ8VR2KL5MN7PT1X",
          reference="gitleaks aws-access-token; detect-secrets AWSKeyDetector"),
    Shape("GOOGLE_API_KEY", _token("AIza", 4, r"[0-9A-Za-z_-]{35}"), "AIza" + _B36[:35], reference="gitleaks gcp-api-key"),
    Shape("GOOGLE_OAUTH", _token("ya29\\.", 5, r"[0-9A-Za-z_-]{20,}+"), "ya29." + _B36, reference="gitleaks gcp oauth token"),
    Shape("STRIPE_KEY", r"k_(?:live|test)_(?<=[sr]k_live_|[sr]k_test_)(?<![A-Za-z0-9_-].{8})(?P<value>[0-9A-Za-z]{16,}+)",
          "sk_live_" + _B36[:24], _B36[:24], "gitleaks stripe-access-token; detect-secrets StripeDetector"),
    Shape("NPM_TOKEN", _token("npm_", 4, r"[A-Za-z0-9]{36}"), "npm_" + _B36,
          reference="gitleaks npm-access-token; detect-secrets NpmDetector"),
    Shape("PYPI_TOKEN", _token("pypi-AgEIcHlwaS5vcmc", 20, r"[A-Za-z0-9_-]{40,}+"), "pypi-AgEIcHlwaS5vcmc" + _B36 + _B36,
          reference="gitleaks pypi-upload-token; detect-secrets PypiTokenDetector"),
    Shape("DOCKER_TOKEN", _token("dckr_pat_", 9, r"[A-Za-z0-9_-]{20,}+"), "dckr_pat_" + _B36[:27], reference="gitleaks dockerhub pat"),
    Shape("DATABRICKS_TOKEN", _token("dapi", 4, r"[a-f0-9]{32}(?:-[0-9])?"), "dapi" + _H40[:32], reference="gitleaks databricks-api-token"),
    Shape("SENDGRID_KEY", _token("SG\\.", 3, r"[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"), "SG." + _B36[:22] + "." + _B36 + "abcdefg",
          reference="gitleaks sendgrid-api-token; detect-secrets SendGridDetector"),
    Shape("VAULT_TOKEN", _token("hv[sbr]\\.", 4, r"[A-Za-z0-9_-]{24,}+"), "hvs." + _B36, reference="gitleaks vault-service-token"),
    Shape("DIGITALOCEAN_TOKEN", _token("do[por]_v1_", 7, r"[a-f0-9]{64}"), "dop_v1_" + _H40 + _H40[:24],
          reference="gitleaks digitalocean-pat"),
    Shape("GROQ_KEY", _token("gsk_", 4, r"[A-Za-z0-9]{48}"), "gsk_" + _B36 + "abcdefghijkl", reference="gitleaks groq-api-key"),
    Shape("REPLICATE_TOKEN", _token("r8_", 3, r"[A-Za-z0-9]{37}"), "r8_" + _B36 + "x", reference="replicate api token"),
    Shape("TELEGRAM_TOKEN", r":(?<=[0-9]{8}:)(?P<value>AA[A-Za-z0-9_-]{33})(?![A-Za-z0-9_-])", "1234567890:AA" + _B36[:33],
          "AA" + _B36[:33],
          reference="gitleaks telegram-bot-api-token; detect-secrets TelegramBotTokenDetector"),
    Shape("DISCORD_WEBHOOK", r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]{1,20}+/[A-Za-z0-9_-]{20,}+",
          "https://discord.com/api/webhooks/123456789012345678/" + _B36, reference="gitleaks discord-webhook"),
    Shape("WANDB_KEY", r"wandb login[ \t]{1,8}+(?:--relogin[ \t]{1,8}+)?(?P<value>(?:local-)?[0-9a-f]{40})(?![0-9a-f])",
          "wandb login " + _H40, _H40, "W&B API key (wandb login)"),
    Shape("AZURE_KEY", r"AccountKey=(?<![A-Za-z0-9].{11})(?P<value>[A-Za-z0-9+/]{20,}+={0,2})",
          "AccountKey=" + _B36 + "==", _B36, "gitleaks azure storage account key; detect-secrets AzureStorageKeyDetector"),
    Shape("AZURE_KEY", r"SharedAccessKey=(?<![A-Za-z0-9].{16})(?P<value>[A-Za-z0-9+/]{20,}+={0,2})",
          "Endpoint=sb://x.servicebus.windows.net/;SharedAccessKey=" + _B36 + "=", _B36, "gitleaks azure service bus key"),
    Shape("AZURE_SAS", r"sig=(?<![A-Za-z0-9_].{4})(?P<value>[A-Za-z0-9%+/=]{20,}+)",
          "https://x.blob.core.windows.net/c?sv=2022&sig=" + _B36,
          _B36, "azure SAS token signature"),
    Shape("URL_PASSWORD", r"://[^/\s:@]{1,256}+:(?P<value>[^/\s@]{1,256}+)@",
          "https://deploy:p4ss-Zq8vR2kL5@registry.example.com/v2", "p4ss-Zq8vR2kL5",
          "detect-secrets BasicAuthDetector (URL credentials)"),
    # -- in context: what surrounds it says it is secret (found from a word, in the lowered text) --------------
    Shape("AUTHORIZATION",
          r"[\"']?[ \t]{0,16}+[:=][ \t]{0,16}+[\"']?"
          r"(?:(?i:bearer|basic|token|digest|negotiate|bot|apikey|sso-key)[ \t]{1,16}+)?(?P<value>[A-Za-z0-9._~+/=:-]{6,}+)",
          "Authorization: Basic dHJhaW5kb2M6aHVudGVyMi1zM2NyZXQ=", "dHJhaW5kb2M6aHVudGVyMi1zM2NyZXQ=",
          "detect-secrets BasicAuthDetector; gitleaks authorization header", anchor="authorization(?<![a-z0-9_].{13})"),
    Shape("BEARER", r"[ \t]{1,16}+(?P<value>[A-Za-z0-9._~+/-]{16,}+=*+)",
          "Bearer " + _B36 + "_bearer", _B36 + "_bearer", "gitleaks generic bearer token", anchor="bearer(?<![a-z0-9_-].{6})"),
    Shape("NETRC_PASSWORD", r"[ \t]{1,16}+(?P<value>\S{4,256}+)",
          "machine api.wandb.ai\n  login user\n  password " + _H40, _H40, "netrc password line",
          anchor="(?m:^[ \t]{0,16}+password)"),
    # NAME=value, "name": "value", --name value: the name holds a secret word
    Shape("SECRET", r"(?P<name>[\w.]{0,64}+)[\"']?[ \t]{0,16}+[=:][ \t]{0,16}+[\"']?(?P<value>(?![\[*])[^\s\"',;`)\]}]{4,}+)",
          "WANDB_API_KEY=" + _H40, _H40, "detect-secrets KeywordDetector", anchor=_KEYWORDS, before=r"\w.",
          check=lambda name, whole: not name.startswith("-") and secret_name(name)),
    Shape("SECRET", r"(?P<name>[\w.-]{0,64}+)(?:[ \t]{1,16}+|=)[\"']?(?P<value>(?![\[*-])[^\s\"',;`)\]}]{4,}+)",
          "--hf-token " + _B36, _B36, "detect-secrets KeywordDetector (command-line flags)", anchor=_KEYWORDS, before=r"\w.-",
          check=lambda name, whole: name.startswith("-") and secret_name(name)),
)

# Strict mode (--redact strict): where a job ran, not only its credentials.
PRIVATE_SHAPES: tuple[Shape, ...] = (
    Shape("HOME", r"/(?:home|Users)/[^/\s:\"']{1,64}+|/root(?![\w.-])", "/home/alice"),
    Shape("HOME", r"~(?<![^\s\"'=:(,]~)[^/\s:\"'~]{0,64}+(?=/)", "~bob/ckpt", "~bob"),
    Shape("IP", r"[0-9]{1,3}+\.[0-9]{1,3}+\.[0-9]{1,3}+(?![0-9])", "10.12.0.7", anchor=r"[0-9]\.(?=[0-9])", before="0-9",
          check=lambda head, whole: _is_ip(whole)),
    Shape("HOST", r"(?![a-z0-9-])", "gpu-node-17.cluster.internal",
          anchor=r"\.(?:com|net|org|io|ai|internal|local|lan|corp|cluster|cn|dev)",
          before="a-z0-9.-", check=lambda head, whole: head[:1].isalnum() and ".." not in head),
    Shape("HOST", r"[-_]?[0-9]{1,8}+[a-z0-9-]{0,32}+(?![a-z0-9])", "dgx-042", anchor=r"(?<![a-z0-9])(?:node|gpu|worker|host|compute|dgx)",
          check=lambda head, whole: True),
)


def _is_ip(text: str) -> bool:
    try:
        ip_address(text)
    except ValueError:
        return False
    return True

_NOT_SECRET_NAME = re.compile(r"(?i)tokeniz|tokens\b|_tokens|token_?(?:id|ids|type|count|len|length|limit|usage|budget)\b"
                              r"|keyboard|^xkb_|^ssh_auth_sock$|_keymap$|^--?key-?(?:file|path|store)\b|_?key_?(?:file|path)\b")


# Shapes found by a regex over the text, one pass each: a pattern that starts with a literal is searched at the
# speed of a substring search (an alternation of them is not), and a match one shape rejects never hides
# another shape's secret inside it. Shapes with an anchor are found from it, all in one pass (_anchored).
_PASSES = tuple((s, re.compile(s.pattern)) for s in SHAPES if not s.anchor)
_STRICT_PASSES = tuple((s, re.compile(s.pattern)) for s in PRIVATE_SHAPES if not s.anchor)


def _compile_anchored(shapes: tuple[Shape, ...]) -> tuple[Anchored, ...]:
    return tuple((s, re.compile(s.anchor), re.compile(s.pattern), re.compile(f"[{s.before}]{{0,128}}+" if s.before else ""),
                  re.compile(f"[{s.before}]" if s.before else "(?!)")) for s in shapes if s.anchor)


Anchored = tuple[Shape, re.Pattern[str], re.Pattern[str], re.Pattern[str], re.Pattern[str]]
_ANCHORED = _compile_anchored(SHAPES)
_STRICT_ANCHORED = _compile_anchored(PRIVATE_SHAPES)
PLACEHOLDER = re.compile(r"\[[A-Z_]{1,40}_[0-9]{1,6}\]")
MASK = "***"

Replace = Callable[[str, str], str]  # (kind, secret) -> what is shown instead


def secret_name(name: str) -> bool:
    """Does a variable or option name say its value is a secret (HF_TOKEN, --api-key, db_password)?"""
    return bool(_SECRET_WORD.search(name)) and not _NOT_SECRET_NAME.search(name)


_SECRET_WORD = re.compile(f"(?i){_WORDS}|^-*key$")


def clip(text: str, cap: int = LINE_CAP) -> str:
    """``text`` with every line longer than ``cap`` characters cut, the cut shown (``[... 98 KB cut]``). A cut
    never keeps half a token: it backs off to where the token began."""
    if len(text) <= cap:
        return text
    lines = text.split("\n")
    if all(len(line) <= cap for line in lines):
        return text
    return "\n".join(clip_line(line, cap) if len(line) > cap else line for line in lines)


_RUN_CHARS = re.compile(f"[{_RUN}]*+")


def clip_line(line: str, cap: int = LINE_CAP) -> str:
    if len(line) <= cap:
        return line
    keep = cap - max(len(_marker(1023)), len(_marker(10**12)))  # head and marker never pass the cap
    head = line[:keep]
    if _RUN_CHARS.fullmatch(line[keep - 1 : keep + 1]):
        tail_run = _RUN_CHARS.match(head[::-1])
        back = tail_run.end() if tail_run else 0
        if back < len(head):  # the token straddling the cut goes whole; a line that is one token keeps its head
            head = head[: len(head) - back]
    return head + _marker(len(line) - len(head))


def _marker(cut: int) -> str:
    size = f"{cut // 1024} KB" if cut >= 1024 else f"{cut} characters"
    return f" [... {size} cut]"


def scan(text: str, replace: Replace, *, strict: bool = False) -> str:
    """``text`` (lines clipped) with every secret replaced by ``replace(kind, secret)``."""
    if not text:
        return text
    text = clip(text)
    for shape, pattern in _PASSES + (_STRICT_PASSES if strict else ()):
        text = pattern.sub(_swapper(shape, replace), text)
    return clip(_anchored(text, _ANCHORED + (_STRICT_ANCHORED if strict else ()), replace))  # placeholders lengthen


def _swapper(shape: Shape, replace: Replace) -> Callable[[re.Match[str]], str]:
    def swap(match: re.Match[str]) -> str:
        whole = match.group(0)
        if "value" not in match.re.groupindex:
            return whole if PLACEHOLDER.fullmatch(whole) else replace(shape.kind, whole)
        value = match.group("value") or ""
        if not value or PLACEHOLDER.fullmatch(value) or value == MASK:
            return whole
        start, end = match.span("value")
        base = match.start()
        return whole[: start - base] + replace(shape.kind, value) + whole[end - base :]

    return swap


def _anchored(text: str, shapes: tuple[Anchored, ...], replace: Replace) -> str:
    """The shapes recognised by a word (``authorization``, ``bearer``, a secret word in a name): the word is
    searched in the lowered text, the rest read around it with bounded matches, so each character is looked
    at a bounded number of times. Spans that overlap an earlier one are left to it."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a character whose lower case is longer: positions must stay aligned
        lowered = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    spans: list[tuple[int, int, str]] = []
    for shape, anchor, pattern, before, one_before in shapes:
        named, valued = "name" in pattern.groupindex, "value" in pattern.groupindex
        seen = 0
        for hit in anchor.finditer(lowered):
            if hit.start() < seen:
                continue
            found = pattern.match(lowered, hit.end())  # the cheap test first: most hits are ordinary words
            if found is None:
                if shape.before:  # later hits inside the same run (tokentoken_key) are the same name
                    seen = before.match(lowered, hit.end()).end()  # type: ignore[union-attr]
                continue
            start = hit.start()
            if shape.before:
                back = before.match(lowered[max(0, start - 128) : start][::-1])
                start -= back.end() if back else 0
                if start > 0 and one_before.match(lowered, start - 1):
                    seen = found.end()  # the run goes on further back than is read: not a name
                    continue
            seen = found.end()
            head = text[start : hit.end()] + (text[found.start("name") : found.end("name")] if named else "")
            if shape.check is not None and not shape.check(head, text[start : found.end()]):
                continue
            first, last = found.span("value") if valued else (start, found.end())
            secret = text[first:last]
            if secret and secret != MASK and not PLACEHOLDER.fullmatch(secret):
                spans.append((first, last, shape.kind))
    if not spans:
        return text
    out: list[str] = []
    done = 0
    for first, last, kind in sorted(spans, key=lambda span: (span[0], -span[1])):
        if first < done:
            continue
        out += [text[done:first], replace(kind, text[first:last])]
        done = last
    out.append(text[done:])
    return "".join(out)


def find(text: str, *, strict: bool = False) -> list[tuple[str, str]]:
    """(kind, secret) of every secret in ``text``, in the order they are masked."""
    found: list[tuple[str, str]] = []

    def record(kind: str, secret: str) -> str:
        found.append((kind, secret))
        return MASK

    scan(text, record, strict=strict)
    return found


def mask(text: str) -> str:
    """``text`` with every secret replaced by ``***`` (for what is shown or stored, not restored)."""
    return scan(text, lambda kind, secret: MASK)
