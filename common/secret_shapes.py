"""The one table of secret shapes: every row a shape, the rule it follows (gitleaks' ``config/gitleaks.toml``,
detect-secrets' plugins) and a fake example that the tests plant on every path. ``common.secrets`` finds them.

A row is found one of four ways: by its ``pattern`` searched over the text (a token's literal prefix), from a
word in the lowered text (``anchor``: ``authorization``, a secret word in a name), on a command line
(``command`` and the ``options`` that carry a password: ``curl -u``, ``sshpass -p``, ``docker login -p``), or by
a finder (``pem``: a private key block; ``hosts``/``ipv6``: strict mode). Rows that differ only in their
example are one pass. Every pattern has a linear form (``tests/security/test_secret_patterns.py``): it starts
at a literal or behind a look-behind, an unbounded repeat is possessive, a repeat inside another is bounded.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
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
    command: str = ""  # a command (regex, lowered text) whose ``options`` carry a secret
    options: tuple[tuple[str, str], ...] = ()  # (option, form): form is value | joined | userpass
    finder: str = ""  # found by code instead of ``pattern`` alone: pem | hosts | ipv6

    @property
    def planted(self) -> str:
        return self.secret or self.example


# Words that make a name secret (HF_TOKEN, --api-key, db_password, DB_PASS, MYSQL_PWD, SESSION_COOKIE, _auth).
_WORDS = (r"token|secret|passw|passphrase|credential|api[-_]?key|access[-_]?key|private[-_]?key|auth[-_]?key|(?<=[_-])key\b"
          r"|(?:^|(?<=[_.-]))pass(?:wd)?(?![a-z])|(?<=[_-])pwd\b|cookie|(?:^|(?<=:))_auth$")
_KEYWORDS = r"token|secret|pass|pwd|credential|apikey|_key|-key|cookie|_auth"  # anchors of a secret name, in the lowered text
# A value after a secret name: quoted, it is masked whole up to its closing quote (a password with spaces).
_MASKED = r"(?!\[[A-Za-z_]{1,40}_[0-9]{1,6}\]|\*\*\*)"  # a placeholder or *** (lowered or not): masked already
_VALUE = r"""(?P<q>["'])?(?P<value>(?(q)""" + _MASKED + r"""(?:(?!(?P=q))[^\n]){1,256}+|(?![\[*])[^\s"',;`)\]}]{4,}+))"""
_FLAG_VALUE = r"""(?P<q>["'])?(?P<value>(?(q)""" + _MASKED + r"""(?:(?!(?P=q))[^\n]){1,256}+|(?![\[*-])[^\s"',;`)\]}]{4,}+))"""
# a value after a Chinese label: up to a space, a quote or Chinese punctuation (。，、 and the CJK block)
_ZH_VALUE = (r"""(?P<q>["'])?(?P<value>(?(q)""" + _MASKED + r"""(?:(?!(?P=q))[^\n]){1,256}+"""
             r"""|(?![\[*])[^\s"',;`)\]}“”‘’\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]{3,256}+))""")
# A secret said in a sentence ("the db password is X", "token 是 X", "数据库密码是X", "我的密码 X"): the word after the
# copula, up to a space, a quote or Chinese punctuation (a final . or : ends the sentence, not the value), or a quoted
# value to its closing quote. Whether it is a value or an ordinary word ("the password is wrong") is _said's call.
_COPULA = (r"(?:is|was)(?:[ \t]{1,8}+(?:now|still|(?:set|changed|reset)[ \t]{1,8}+to))?+"
           r"|(?:set|changed|reset)[ \t]{1,8}+to")
_SAID_AT = (r"(?<![a-z0-9])(?:password|passwd|passphrase|pwd|token|secret|(?:api|access|secret|auth)[ _-]?key)"
            r"(?=[ \t]{1,16}(?:is|was|set|changed|reset)(?![a-z])|[ \t]{0,16}(?:是|为))")  # the name, a copula next
_WORD_END = r"""\s"'`,;)\]}“”‘’\u3000-\u303f\u4e00-\u9fff\uff00-\uffef"""
_SAID_VALUE = (r"""(?:(?P<q>["'`])|[“‘])?(?![\[*$<{%/~.:=\s])(?P<value>(?(q)(?:(?!(?P=q))[^\n]){1,256}+"""
               r"""|(?:[^""" + _WORD_END + r""".:]|[.:](?=[^""" + _WORD_END + r""".:])){1,256}+))(?(q)(?P=q))""")
_SAID = (r"(?:[ \t]{1,16}+(?:" + _COPULA + r")(?::[ \t]{0,16}+|[ \t]{1,16}+)|[ \t]{0,16}+(?:是|为)[ \t]{0,16}+)"
         + _SAID_VALUE)
_ZH_SAID = r"[ \t]{0,16}+(?:(?:是|为|设为|设置为|改为|改成)[ \t]{0,16}+|(?<=[ \t]))" + _SAID_VALUE
# "password is required" is a sentence, not a netrc line whose password is "is"
_COPULA_WORD = r"(?:is|was|are|were|set|changed|reset)(?![^\s:])"
_PEM_BEGIN = r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
_PEM_END = r"-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
# user:PASSWORD@ in a URL: the password runs to the last @ before the host (an @ inside it is taken when another
# @ follows within the same authority; every repeat bounded or possessive)
_URL_PASSWORD = (r"://[^/\s:]{0,256}+:(?P<value>[^/\s@]{1,256}+(?:@(?=[^/\s@]{1,256}+@)[^/\s@]{1,256}+){0,8}+)@")
# an env entry of a Kubernetes manifest whose name says secret: ``- name: DB_PASSWORD`` then ``value: ...``
_K8S_VALUE = (r"[\"']?[ \t]{0,16}+:[ \t]{0,16}+[\"']?(?P<name>[\w.-]{1,64}+)[\"']?[ \t]{0,16}+,?+[ \t]{0,16}+"
              r"(?:\r?\n[ \t]{0,64}+)?[\"']?value[\"']?[ \t]{0,16}+:[ \t]{0,16}+")
_H40 = "0123456789abcdef0123456789abcdef01234567"
_B36 = "Zq8vR2kL5mN7pT1xW4yB6cD9fG3hJ0sA2eU5"


_PREFIXES: list[str] = []  # every token's prefix, in table order: TOKEN_PREFIX


def _token(prefix: str, width: int, body: str) -> str:
    """A token shape: its literal ``prefix`` (``width`` characters) first, so the engine finds candidates at the
    speed of a substring search; then a look-behind that it does not continue a run of token characters."""
    _PREFIXES.append(prefix)
    return f"{prefix}(?<![{_RUN}].{{{width}}}){body}"


def _assignment(name: str, whole: str) -> bool:
    return not name.startswith("-") and secret_name(name)


def _flag(name: str, whole: str) -> bool:
    return name.startswith("-") and secret_name(name)



def _secret_env_name(head: str, whole: str) -> bool:
    """A Kubernetes env entry whose name (after ``name:``) says its value is a secret."""
    return secret_name(head[4:])


_PASSWORD_WORD = re.compile(r"pass|pwd|密码|口令")
_SYMBOLS = frozenset("!@#$%^&*+=?~|\\")  # what a password holds and a word in a sentence does not
_PIECE = re.compile(r"[a-z]*+[0-9]*+|[0-9]++[a-z]++")  # sha256, 32, bytes, v1, 24h: a word or a number of prose
_JOINS = re.compile(r"[-._/:]")


def _said(pattern: str) -> Callable[[str, str], bool]:
    """The check of a secret said in a sentence: the value ``pattern`` read after the name, or an ordinary word?"""
    compiled = re.compile(pattern)

    def check(head: str, whole: str) -> bool:
        lowered = whole.lower()
        found = compiled.match(lowered, len(head))
        if found is None:
            return False
        value = (whole if len(lowered) == len(whole) else lowered)[found.start("value") : found.end("value")]
        return looks_like_a_value(value, digits=bool(_PASSWORD_WORD.search(head.lower())))

    return check


def looks_like_a_value(word: str, *, digits: bool = False) -> bool:
    """Is ``word``, said to be a secret in a sentence, a value rather than an ordinary word? Six characters or more,
    holding a letter and a digit or a symbol (``hunter2``, ``P@ssw0rd``, ``Zq8vR2kL5mN8``), and not lower-case words
    and numbers joined by hyphens or dots (``sha256-hashed``, ``32-bytes``, ``v1.2.3``). ``wrong``, ``required``,
    ``expired``, ``case-sensitive`` are words. With ``digits`` (a password, not a token: token ids are numbers)
    digits alone are a value too (a PIN: ``123456``)."""
    if len(word) < 6:
        return False
    if not any(c.isalpha() for c in word):
        return digits and any(c.isdigit() for c in word)
    if any(c in _SYMBOLS for c in word):
        return True
    if not any(c.isdigit() for c in word):
        return False
    pieces = _JOINS.split(word)
    return not (word.islower() and len(pieces) > 1 and all(_PIECE.fullmatch(piece) for piece in pieces))


_SAID_CHECK, _ZH_SAID_CHECK = _said(_SAID), _said(_ZH_SAID)

SHAPES: tuple[Shape, ...] = (
    # -- tokens: a prefix no ordinary word has ---------------------------------------------------------------
    Shape("PRIVATE_KEY", _PEM_BEGIN,
          "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAq8vR2kL5mN7pT1xW4yB6cD9fG3h\n-----END RSA PRIVATE KEY-----",
          "MIIEowIBAAKCAQEAq8vR2kL5mN7pT1xW4yB6cD9fG3h", "gitleaks private-key; detect-secrets PrivateKeyDetector",
          finder="pem"),
    Shape("JWT", _token("eyJ", 3, r"[A-Za-z0-9_-]{5,}+\.[A-Za-z0-9_-]{8,}+(?:\.[A-Za-z0-9_-]++)?"),
          "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ0cmFpbmRvYyJ9.c2lnbmF0dXJlX29mX3RoZV90b2tlbg",
          reference="gitleaks jwt; detect-secrets JwtTokenDetector"),
    Shape("ANTHROPIC_KEY", _token("sk-ant-", 7, r"[A-Za-z0-9_-]{20,}+"), "sk-ant-api03-" + _B36 + "Qw",
          reference="gitleaks anthropic-api-key, anthropic-admin-api-key"),
    Shape("OPENAI_KEY", _token("sk-", 3, r"(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}+"), "sk-proj-" + _B36,
          reference="gitleaks openai-api-key; detect-secrets OpenAIDetector"),
    Shape("HF_TOKEN", _token("hf_", 3, r"[A-Za-z0-9]{20,}+"), "hf_" + _B36[:34], reference="gitleaks huggingface-access-token"),
    Shape("SLACK_TOKEN", _token("x(?:ox[abposre]|app)[.-]", 5, r"[A-Za-z0-9-]{10,}+"), "xoxb-1234567890-" + _B36[:24],
          reference="gitleaks slack-bot-token, slack-user-token, slack-app-token; detect-secrets SlackDetector"),
    Shape("SLACK_WEBHOOK", r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{8,}+",
          "https://hooks.slack.com/services/T0000/B0000/" + _B36[:24], reference="gitleaks slack-webhook-url"),
    Shape("GITHUB_TOKEN", _token("gh[pousr]_", 4, r"[A-Za-z0-9]{20,}+") + "|" + _token("github_pat_", 11, r"[A-Za-z0-9_]{20,}+"),
          "ghp_" + _B36, reference="gitleaks github-pat, github-oauth, github-app-token; detect-secrets GitHubTokenDetector"),
    Shape("GITLAB_TOKEN", _token("gl", 2, r"(?:pat|dt|rt|ptt|cbt|oas|ft|imt|agent|soat|ffct)-[A-Za-z0-9_.-]{20,}+"),
          "glpat-" + _B36[:20], reference="gitleaks gitlab-pat and the other gitlab-* rules; detect-secrets GitLabTokenDetector"),
    Shape("AWS_ACCESS_KEY", r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])(?<![A-Za-z0-9].{4})[0-9A-Z]{16}(?![0-9A-Za-z])",
          "AKIAZQ8VR2KL5MN7PT1X", reference="gitleaks aws-access-token; detect-secrets AWSKeyDetector"),
    Shape("GOOGLE_API_KEY", _token("AIza", 4, r"[0-9A-Za-z_-]{35}"), "AIza" + _B36[:35], reference="gitleaks gcp-api-key"),
    Shape("GOOGLE_OAUTH", _token("ya29\\.", 5, r"[0-9A-Za-z_-]{20,}+"), "ya29." + _B36, reference="gitleaks gcp oauth token"),
    Shape("STRIPE_KEY", r"k_(?:live|test|prod)_(?<=[sr]k_live_|[sr]k_test_|[sr]k_prod_)(?<![A-Za-z0-9_-].{8})(?P<value>[0-9A-Za-z]{10,}+)",
          "sk_live_" + _B36[:24], _B36[:24], "gitleaks stripe-access-token; detect-secrets StripeDetector"),
    Shape("NPM_TOKEN", _token("npm_", 4, r"[A-Za-z0-9]{36,}+"), "npm_" + _B36,
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
          "AA" + _B36[:33], reference="gitleaks telegram-bot-api-token; detect-secrets TelegramBotTokenDetector"),
    Shape("DISCORD_WEBHOOK", r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]{1,20}+/[A-Za-z0-9_-]{20,}+",
          "https://discord.com/api/webhooks/123456789012345678/" + _B36, reference="gitleaks discord-webhook"),
    Shape("WANDB_KEY", r"wandb login[ \t]{1,8}+(?:--relogin[ \t]{1,8}+)?(?P<value>(?:local-)?[0-9a-f]{40})(?![0-9a-f])",
          "wandb login " + _H40, _H40, "W&B API key (wandb login)"),
    Shape("WANDB_KEY", r"wandb\.login\([^)\n]{0,128}?key[ \t]{0,8}+=[ \t]{0,8}+[\"'](?P<value>[^\"'\n]{8,128}+)[\"']",
          "wandb.login(key='" + _H40 + "')", _H40, "W&B API key (wandb.login(key=...))"),
    Shape("AZURE_KEY", r"AccountKey=(?<![A-Za-z0-9].{11})(?P<value>[A-Za-z0-9+/]{20,}+={0,2})",
          "AccountKey=" + _B36 + "==", _B36, "gitleaks azure storage account key; detect-secrets AzureStorageKeyDetector"),
    Shape("AZURE_KEY", r"SharedAccessKey=(?<![A-Za-z0-9].{16})(?P<value>[A-Za-z0-9+/]{20,}+={0,2})",
          "Endpoint=sb://x.servicebus.windows.net/;SharedAccessKey=" + _B36 + "=", _B36, "gitleaks azure service bus key"),
    Shape("AZURE_SAS", r"sig=(?<![A-Za-z0-9_].{4})(?P<value>[A-Za-z0-9%+/=]{20,}+)",
          "https://x.blob.core.windows.net/c?sv=2022&sig=" + _B36, _B36, "azure SAS token signature"),
    Shape("URL_PASSWORD", _URL_PASSWORD, "https://deploy:p4ss-Zq8vR2kL5@registry.example.com/v2", "p4ss-Zq8vR2kL5",
          "detect-secrets BasicAuthDetector (URL credentials)"),
    Shape("URL_PASSWORD", _URL_PASSWORD, "redis://:Zq8vR2kL5-cache@redis-master:6379/0", "Zq8vR2kL5-cache",
          "URL credentials without a user (redis://:pw@)"),
    Shape("URL_PASSWORD", _URL_PASSWORD, "postgresql://trainer:Zq8v@R2kL5@db.example.com:5432/runs", "Zq8v@R2kL5",
          "URL credentials whose password holds an @ (up to the last @ before the host)"),
    Shape("PGPASS_PASSWORD", r"(?<![^\s'\"`=\[\],;(])(?=[0-9]{0,253}+[A-Za-z_.*-])[A-Za-z0-9*][\w.*-]{0,253}+:(?:[0-9]{1,5}+|\*):"
          r"[^:\s]{1,63}+:[^:\s]{1,63}+:(?P<value>[^\s:'\"`]{4,200}+)(?=['\"`]?(?:\s|$))",
          "db.internal:5432:runs:trainer:Zq8v-pgpass-R2kL5", "Zq8v-pgpass-R2kL5",
          "a ~/.pgpass line: host:port:database:user:password (PostgreSQL's password file)"),
    # -- private keys and key files that are not PEM -----------------------------------------------------------
    Shape("PRIVATE_KEY", r"Private-Lines:[ \t]{0,8}+[0-9]{1,5}+\r?\n"
          r"(?P<value>[A-Za-z0-9+/=]{1,128}+(?=[\"'`]?(?![^\r\n]))(?:\r?\n[A-Za-z0-9+/=]{1,128}+(?=[\"'`]?(?![^\r\n]))){0,4096}+)",
          "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: trainer@dgx\nPublic-Lines: 2\n"
          "AAAAC3NzaC1lZDI1NTE5AAAAIPub1icKeyPartOfTheFileNotSecretAtA11\nPrivate-Lines: 1\nAAAAIF" + _B36
          + "Zq8vR2kL5\nPrivate-MAC: 9e107d9d372bb6826bd81d3542a419d6",
          "AAAAIF" + _B36 + "Zq8vR2kL5", "PuTTY .ppk private key (its Private-Lines; gitleaks private-key covers PEM only)"),
    # -- GCS HMAC keys: the secret after its access ID (a pair pasted from gcloud), then the access ID itself ---
    Shape("GCS_HMAC_KEY", r"GOOG(?<![A-Za-z0-9].{4})[0-9A-Z]{20}(?:[0-9A-Z]{37})?+(?:[ \t]{0,16}+[:,;=|/][ \t]{0,16}+|[ \t]{1,16}+)"
          r"(?P<value>[A-Za-z0-9+/]{40})(?![A-Za-z0-9+/=])",
          "GOOGTS7C7FUP3AIRVJTE2BCDKINBTES3HC2GY5CBFJDCQ2SYHV6A6XXVTJFSA,bGoa+V7g/yqDXvKRqq+JTFn4uQZbPiQJo4pf9RzJ",
          "bGoa+V7g/yqDXvKRqq+JTFn4uQZbPiQJo4pf9RzJ", "GCS HMAC key secret (40 base64 characters) after its access ID"),
    Shape("GCS_HMAC_KEY", r"GOOG(?<![A-Za-z0-9].{4})[0-9A-Z]{20}(?:[0-9A-Z]{37})?+(?![0-9A-Za-z])",
          "gcloud storage hmac describe GOOG1EZQ8VR2KL5MN7PT1XW4YB6CD9FG3HJ0SA2EU5ZQ8VR2KL5MN7PT1XW4Y",
          "GOOG1EZQ8VR2KL5MN7PT1XW4YB6CD9FG3HJ0SA2EU5ZQ8VR2KL5MN7PT1XW4Y",
          "GCS HMAC key access ID (GOOG and 20 or 57 characters: cloud.google.com/storage/docs/authentication/hmackeys)"),
    # -- more tokens by prefix (gitleaks' rules, detect-secrets' plugins; ML services) --------------------------
    Shape("HF_TOKEN", _token("api_org_", 8, r"[A-Za-z0-9]{30,}+"), "api_org_" + _B36[:34],
          reference="gitleaks huggingface-organization-api-token"),
    Shape("SLACK_TOKEN", _token("x(?:ox[abposre]|app)[.-]", 5, r"[A-Za-z0-9-]{10,}+"), "xoxe.xoxp-1-" + _B36,
          reference="gitleaks slack-config-access-token"),
    Shape("GITLAB_TOKEN", _token("GR1348941", 9, r"[A-Za-z0-9_-]{20,}+"), "GR1348941" + _B36[:20], reference="gitleaks gitlab-rrt"),
    Shape("STRIPE_KEY", _token("whsec_", 6, r"[A-Za-z0-9+/]{24,}+"), "whsec_" + _B36, reference="stripe webhook signing secret"),
    Shape("AWS_BEDROCK_KEY", _token("ABSK", 4, r"[A-Za-z0-9+/]{100,}+={0,2}"), "ABSK" + _B36 * 3,
          reference="gitleaks aws-amazon-bedrock-api-key-long-lived"),
    Shape("GOOGLE_OAUTH", _token("GOCSPX-", 7, r"[A-Za-z0-9_-]{20,}+"), "GOCSPX-" + _B36[:28], reference="google oauth client secret"),
    Shape("GOOGLE_OAUTH", _token("1//0", 4, r"[A-Za-z0-9_-]{30,}+"), "1//0" + _B36 + "Zq8vR2kL5", reference="google oauth refresh token"),
    Shape("AZURE_KEY", r"[a-z0-9_~.-]{31,34}+(?![a-z0-9_~.-])",
          "8Qw7Q~" + _B36[:32], reference="gitleaks azure-ad-client-secret", anchor="q~(?<=[0-9]q~)", before="a-z0-9_~.",
          check=lambda head, whole: len(head) == 6 and head[4] == "Q"),
    Shape("TWILIO_KEY", _token("SK", 2, r"[0-9a-fA-F]{32}(?![0-9A-Za-z])"), "SK" + _H40[:32],
          reference="gitleaks twilio-api-key; detect-secrets TwilioKeyDetector"),
    Shape("MAILCHIMP_KEY", r"", _H40[:32] + "-us21", reference="gitleaks mailchimp-api-key; detect-secrets MailchimpDetector",
          anchor=r"(?<=[0-9a-f])-us[0-9]{1,2}(?![a-z0-9])", before="0-9a-f",
          check=lambda head, whole: bool(re.fullmatch(r"[0-9a-fA-F]{32}-us[0-9]{1,2}", head))),
    Shape("SHOPIFY_TOKEN", _token("shp(?:at|ca|pa|ss)_", 6, r"[a-fA-F0-9]{32,}+"), "shpat_" + _H40[:32], reference="gitleaks shopify-*"),
    Shape("LINEAR_KEY", _token("lin_api_", 8, r"[A-Za-z0-9]{40,}+"), "lin_api_" + _H40, reference="gitleaks linear-api-key"),
    Shape("POSTMAN_KEY", _token("PMAK-", 5, r"[A-Fa-f0-9]{24}-[A-Fa-f0-9]{34}"), "PMAK-" + _H40[:24] + "-" + _H40[:34],
          reference="gitleaks postman-api-token"),
    Shape("DOPPLER_TOKEN", _token("dp\\.pt\\.", 6, r"[A-Za-z0-9]{40,}+"), "dp.pt." + _B36 + "Zq8vR2k",
          reference="gitleaks doppler-api-token"),
    Shape("PULUMI_TOKEN", _token("pul-", 4, r"[a-f0-9]{40}"), "pul-" + _H40, reference="gitleaks pulumi-api-token"),
    Shape("TERRAFORM_TOKEN", r"[a-z0-9_=-]{60,}+", "Zq8vR2kL5mN7pT.atlasv1." + _B36 + _B36[:30],
          reference="gitleaks hashicorp-tf-api-token",
          anchor=r"\.atlasv1\.", before="a-z0-9", check=lambda head, whole: len(head) == 23),
    Shape("SENTRY_TOKEN", _token("sntry[us]_", 7, r"[A-Za-z0-9+/=_]{40,}+"), "sntryu_" + _H40 + _H40[:24],
          reference="gitleaks sentry-user-token, sentry-org-token"),
    Shape("ONEPASSWORD_TOKEN", _token("ops_eyJ", 7, r"[A-Za-z0-9+/]{100,}+={0,3}"), "ops_eyJ" + _B36 * 3,
          reference="gitleaks 1password-service-account-token"),
    Shape("ONEPASSWORD_KEY", _token("A3-", 3, r"[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}"),
          "A3-ZQ8VR2-KL5MN7PT1XW-4YB6C-D9FG3-HJ0SA", reference="gitleaks 1password-secret-key"),
    Shape("AGE_SECRET_KEY", _token("AGE-SECRET-KEY-1", 16, r"[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
          "AGE-SECRET-KEY-1" + ("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L" * 2)[:58], reference="gitleaks age-secret-key"),
    Shape("GRAFANA_TOKEN", _token("glc_", 4, r"[A-Za-z0-9+/]{32,}+={0,3}"), "glc_" + _B36, reference="gitleaks grafana-cloud-api-token"),
    Shape("GRAFANA_TOKEN", _token("glsa_", 5, r"[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"), "glsa_" + _B36[:32] + "_" + _H40[:8],
          reference="gitleaks grafana-service-account-token"),
    Shape("GRAFANA_TOKEN", _token("eyJrIjoi", 8, r"[A-Za-z0-9]{50,}+={0,3}"), "eyJrIjoi" + _B36 + _B36[:20],
          reference="gitleaks grafana-api-key"),
    Shape("NEW_RELIC_KEY", _token("NR(?:AK|II)-", 5, r"[A-Za-z0-9-]{27,}+"), "NRAK-" + _B36[:27],
          reference="gitleaks new-relic-user-api-key"),
    Shape("PERPLEXITY_KEY", _token("pplx-", 5, r"[A-Za-z0-9]{40,}+"), "pplx-" + _B36 + "Zq8vR2kL5mN7",
          reference="gitleaks perplexity-api-key"),
    Shape("PREFECT_TOKEN", _token("pnu_", 4, r"[A-Za-z0-9]{36,}+"), "pnu_" + _B36, reference="gitleaks prefect-api-token"),
    Shape("README_TOKEN", _token("rdme_", 5, r"[a-z0-9]{70,}+"), "rdme_" + _H40 + _H40[:30], reference="gitleaks readme-api-token"),
    Shape("RUBYGEMS_TOKEN", _token("rubygems_", 9, r"[a-f0-9]{48,}+"), "rubygems_" + _H40 + _H40[:8],
          reference="gitleaks rubygems-api-token"),
    Shape("SENDINBLUE_KEY", _token("xkeysib-", 8, r"[a-f0-9]{64}-[A-Za-z0-9]{16}"), "xkeysib-" + _H40 + _H40[:24] + "-" + _B36[:16],
          reference="gitleaks sendinblue-api-token"),
    Shape("SQUARE_TOKEN", _token("sq0(?:atp|csp)-", 7, r"[0-9A-Za-z_-]{22,}+"), "sq0csp-" + _B36[:43],
          reference="gitleaks square-access-token; detect-secrets SquareOAuthDetector"),
    Shape("SQUARE_TOKEN", _token("EAAA", 4, r"[A-Za-z0-9_-]{56,}+"), "EAAA" + _B36 + _B36[:24], reference="gitleaks square-access-token"),
    Shape("FACEBOOK_TOKEN", _token("EAA[MC]", 4, r"[A-Za-z0-9]{100,}+"), "EAAC" + _B36 * 3,
          reference="gitleaks facebook-page-access-token"),
    Shape("OCTOPUS_KEY", _token("API-", 4, r"[A-Z0-9]{26}(?![A-Za-z0-9])"), "API-ZQ8VR2KL5MN7PT1XW4YB6CD9FG",
          reference="gitleaks octopus-deploy-api-key"),
    Shape("OPENSHIFT_TOKEN", _token("sha256~", 7, r"[A-Za-z0-9_-]{43}"), "sha256~" + _B36 + "Zq8vR2k",
          reference="gitleaks openshift-user-token"),
    Shape("DYNATRACE_TOKEN", _token("dt0c01\\.", 7, r"[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}"), "dt0c01." + _B36[:24] + "." + _H40 + _H40[:24],
          reference="gitleaks dynatrace-api-token"),
    Shape("EASYPOST_TOKEN", _token("EZ[AT]K", 4, r"[A-Za-z0-9]{54}"), "EZAK" + _B36 + _H40[:18], reference="gitleaks easypost-api-token"),
    Shape("FLUTTERWAVE_KEY", _token("FLWSECK", 7, r"(?:_TEST)?-[A-Za-z0-9]{12,}+(?:-X)?"), "FLWSECK_TEST-" + _H40[:32] + "-X",
          reference="gitleaks flutterwave-secret-key"),
    Shape("FRAMEIO_TOKEN", _token("fio-u-", 6, r"[A-Za-z0-9_=-]{64}"), "fio-u-" + _B36 + _H40[:28], reference="gitleaks frameio-api-token"),
    Shape("HEROKU_KEY", _token("HRKU-AA", 7, r"[0-9A-Za-z_-]{58}"), "HRKU-AA" + _B36 + _H40[:22], reference="gitleaks heroku-api-key-v2"),
    Shape("INFRACOST_TOKEN", _token("ico-", 4, r"[A-Za-z0-9]{32}"), "ico-" + _B36[:32], reference="gitleaks infracost-api-token"),
    Shape("NOTION_TOKEN", _token("ntn_", 4, r"[0-9]{11}[A-Za-z0-9]{35}"), "ntn_12345678901" + _B36[:35],
          reference="gitleaks notion-api-token"),
    Shape("PLANETSCALE_TOKEN", _token("pscale_", 7, r"(?:tkn|pw|oauth)_[A-Za-z0-9_.=-]{32,}+"), "pscale_pw_" + _B36,
          reference="gitleaks planetscale-password, planetscale-api-token"),
    Shape("ARTIFACTORY_KEY", _token("AKCp", 4, r"[A-Za-z0-9]{60,}+"), "AKCp" + _B36 + _B36[:33],
          reference="gitleaks artifactory-api-key; detect-secrets ArtifactoryDetector"),
    Shape("ARTIFACTORY_KEY", _token("cmVmd", 5, r"[A-Za-z0-9]{59}(?![A-Za-z0-9])"), "cmVmd" + _B36 + _H40[:23],
          reference="gitleaks artifactory-reference-token"),
    Shape("DUFFEL_TOKEN", _token("duffel_(?:test|live)_", 12, r"[A-Za-z0-9_=-]{43}"), "duffel_live_" + _B36 + "Zq8vR2k",
          reference="gitleaks duffel-api-token"),
    Shape("CLOJARS_TOKEN", _token("CLOJARS_", 8, r"[A-Za-z0-9]{60}"), "CLOJARS_" + _B36 + _H40[:24],
          reference="gitleaks clojars-api-token"),
    Shape("FLYIO_TOKEN", _token("fo1_", 4, r"[A-Za-z0-9_-]{43}"), "fo1_" + _B36 + "Zq8vR2k", reference="gitleaks flyio-access-token"),
    Shape("FLYIO_TOKEN", _token("fm2_", 4, r"[A-Za-z0-9+/]{100,}+={0,3}"), "FlyV1 fm2_" + _B36 * 3, "fm2_" + _B36 * 3,
          reference="gitleaks flyio-access-token (macaroon)"),
    Shape("ALIBABA_KEY", _token("LTAI", 4, r"[A-Za-z0-9]{20}(?![A-Za-z0-9])"), "LTAI" + _B36[:20],
          reference="gitleaks alibaba-access-key-id"),
    Shape("CLOUDFLARE_KEY", _token("v1\\.0-", 5, r"[a-f0-9]{24}-[a-f0-9]{146}"), "v1.0-" + _H40[:24] + "-" + (_H40 * 4)[:146],
          reference="gitleaks cloudflare-origin-ca-key"),
    Shape("AIRTABLE_TOKEN", _token("pat", 3, r"[A-Za-z0-9]{14}\.[a-f0-9]{64}"), "pat" + _B36[:14] + "." + _H40 + _H40[:24],
          reference="gitleaks airtable-personnal-access-token"),
    Shape("ADOBE_SECRET", _token("p8e-", 4, r"[A-Za-z0-9]{32}"), "p8e-" + _B36[:32], reference="gitleaks adobe-client-secret"),
    Shape("HARNESS_KEY", _token("(?:pat|sat)\\.", 4, r"[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}"),
          "pat." + _B36[:22] + "." + _B36[:24] + "." + _B36[:20], reference="gitleaks harness-api-key"),
    Shape("SOURCEGRAPH_TOKEN", _token("sgp_", 4, r"[A-Za-z0-9_]{40,}+"), "sgp_" + _H40[:16] + "_" + _H40,
          reference="gitleaks sourcegraph-access-token"),
    Shape("SCALINGO_TOKEN", _token("tk-us-", 6, r"[A-Za-z0-9_-]{48}"), "tk-us-" + _B36 + _H40[:12],
          reference="gitleaks scalingo-api-token"),
    Shape("SETTLEMINT_TOKEN", _token("sm_(?:aat|pat|sat)_", 7, r"[A-Za-z0-9]{16}"), "sm_pat_" + _B36[:16],
          reference="gitleaks settlemint-*"),
    Shape("SHIPPO_TOKEN", _token("shippo_(?:live|test)_", 12, r"[a-fA-F0-9]{40}"), "shippo_live_" + _H40,
          reference="gitleaks shippo-api-token"),
    Shape("TYPEFORM_TOKEN", _token("tfp_", 4, r"[A-Za-z0-9_.=-]{59}"), "tfp_" + _B36 + _H40[:23], reference="gitleaks typeform-api-token"),
    Shape("DISCORD_TOKEN", START + r"[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27}(?![A-Za-z0-9_-])",
          "M" + _B36[:23] + ".Zq8vR2." + _B36[:27], reference="detect-secrets DiscordBotTokenDetector"),
    Shape("NGC_KEY", _token("nvapi-", 6, r"[A-Za-z0-9_-]{40,}+"), "nvapi-" + _B36 + _H40[:28],
          reference="NVIDIA NGC / build.nvidia.com API key"),
    Shape("LANGSMITH_KEY", _token("lsv2_(?:pt|sk)_", 8, r"[A-Za-z0-9_]{32,}+"), "lsv2_pt_" + _H40[:32] + "_" + _H40[:10],
          reference="LangSmith API key"),
    Shape("PINECONE_KEY", _token("pcsk_", 5, r"[A-Za-z0-9_]{40,}+"), "pcsk_" + _B36[:6] + "_" + _B36 + _B36[:10],
          reference="Pinecone API key"),
    Shape("XAI_KEY", _token("xai-", 4, r"[A-Za-z0-9]{50,}+"), "xai-" + _B36 + _B36[:20], reference="xAI API key"),
    Shape("FIREWORKS_KEY", _token("fw_", 3, r"[A-Za-z0-9]{20,}+"), "fw_" + _B36[:24], reference="Fireworks AI API key"),
    Shape("ANYSCALE_KEY", _token("esecret_", 8, r"[A-Za-z0-9]{20,}+"), "esecret_" + _B36[:26], reference="Anyscale API key"),
    Shape("TOGETHER_KEY", _token("tgp_v1_", 7, r"[A-Za-z0-9_-]{30,}+"), "tgp_v1_" + _B36 + "Zq8vR2kL5", reference="Together AI API key"),
    Shape("NEPTUNE_TOKEN", _token("eyJhcGlfYWRkcmVzcyI6", 20, r"[A-Za-z0-9+/=]{20,}+"), "eyJhcGlfYWRkcmVzcyI6" + _B36,
          reference="neptune.ai API token (base64 of {\"api_address\":...)"),
    # -- in a URL: presigned and signed URLs -------------------------------------------------------------------
    Shape("URL_SIGNATURE", r"=(?P<value>[A-Za-z0-9%+/=_.~-]{8,4096}+)",
          "https://bucket.s3.amazonaws.com/ckpt.pt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=" + _H40 + "&x=1", _H40,
          "AWS SigV4 presigned URL (X-Amz-Signature, X-Amz-Security-Token)",
          anchor=r"(?<![a-z0-9_-])(?:x-amz-signature|x-amz-security-token|x-goog-signature|signature)(?==)"),
    Shape("URL_SIGNATURE", r"=(?P<value>[A-Za-z0-9%+/=_.~-]{8,4096}+)",
          "https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Signature=" + _H40 + _H40, _H40 + _H40,
          "GCS V4 signed URL (X-Goog-Signature)",
          anchor=r"(?<![a-z0-9_-])(?:x-amz-signature|x-amz-security-token|x-goog-signature|signature)(?==)"),
    # -- in context: what surrounds it says it is secret (found from a word, in the lowered text) --------------
    Shape("AUTHORIZATION",
          r"[\"']?[ \t]{0,16}+[:=][ \t]{0,16}+[\"']?"
          r"(?:(?i:bearer|basic|token|digest|negotiate|bot|apikey|sso-key)[ \t]{1,16}+)?(?P<value>[A-Za-z0-9._~+/=:-]{6,}+)",
          "Authorization: Basic dHJhaW5kb2M6aHVudGVyMi1zM2NyZXQ=", "dHJhaW5kb2M6aHVudGVyMi1zM2NyZXQ=",
          "detect-secrets BasicAuthDetector; gitleaks authorization header", anchor="authorization(?<![a-z0-9_].{13})"),
    Shape("BEARER", r"[ \t]{1,16}+(?P<value>[A-Za-z0-9._~+/-]{16,}+=*+)",
          "Bearer " + _B36 + "_bearer", _B36 + "_bearer", "gitleaks generic bearer token", anchor="bearer(?<![a-z0-9_-].{6})"),
    Shape("COOKIE", r"[\"']?[ \t]{0,16}+:[ \t]{0,16}+[\"']?(?P<value>[^\r\n\"']{4,2048}+)",
          "Cookie: sessionid=" + _B36[:24] + "; csrftoken=" + _H40[:32], "sessionid=" + _B36[:24] + "; csrftoken=" + _H40[:32],
          "HTTP Cookie header (gitleaks gitlab-session-cookie, generic)",
          anchor=r"(?<![a-z0-9_-])(?:set-cookie|cookie)(?=[\"']?[ \t]{0,16}:)"),
    Shape("COOKIE", r"[\"']?[ \t]{0,16}+:[ \t]{0,16}+[\"']?(?P<value>[^\r\n\"']{4,2048}+)",
          "Set-Cookie: _gitlab_session=" + _H40[:32] + "; path=/; HttpOnly", "_gitlab_session=" + _H40[:32],
          "HTTP Set-Cookie header", anchor=r"(?<![a-z0-9_-])(?:set-cookie|cookie)(?=[\"']?[ \t]{0,16}:)"),
    Shape("NETRC_PASSWORD", r"[ \t]{1,16}+(?!" + _COPULA_WORD + r")(?P<value>\S{1,256}+)",
          "machine api.wandb.ai\n  login user\n  password " + _H40, _H40, "netrc password line",
          anchor="(?m:^[ \t]{0,16}+password)"),
    Shape("NETRC_PASSWORD",
          r"(?:[ \t]{1,16}+(?!password[ \t])\S{1,256}+){0,6}+[ \t]{1,16}+password[ \t]{1,16}+"
          r"(?!" + _COPULA_WORD + r")(?P<value>\S{1,256}+)",
          "machine api.wandb.ai login user password " + _H40, _H40, "netrc on one line (machine h login u password p)",
          anchor=r"(?<![a-z0-9_.-])(?:machine|default)(?=[ \t])"),
    # NAME=value, "name": "value", --name value: the name holds a secret word; a quoted value is masked whole
    Shape("SECRET", r"(?P<name>[\w.-]{0,64}+)[\"']?[ \t]{0,16}+[=:][ \t]{0,16}+" + _VALUE,
          "WANDB_API_KEY=" + _H40, _H40, "detect-secrets KeywordDetector", anchor=_KEYWORDS, before=r"\w.-",
          check=_assignment),
    Shape("SECRET", r"(?P<name>[\w.-]{0,64}+)[\"']?[ \t]{0,16}+[=:][ \t]{0,16}+" + _VALUE,
          "DB_PASS=Zq8vR2kL5mN7", "Zq8vR2kL5mN7", "gitleaks generic-api-key (passw(or)?d, pass, pwd)", anchor=_KEYWORDS, before=r"\w.-",
          check=_assignment),
    Shape("SECRET", r"(?P<name>[\w.-]{0,64}+)[\"']?[ \t]{0,16}+[=:][ \t]{0,16}+" + _VALUE,
          "MYSQL_PWD='correct horse Zq8vR2 staple'", "correct horse Zq8vR2 staple", "a quoted password with spaces, masked whole",
          anchor=_KEYWORDS, before=r"\w.-", check=_assignment),
    Shape("SECRET", r"(?P<name>[\w.-]{0,64}+)[\"']?[ \t]{0,16}+[=:][ \t]{0,16}+" + _VALUE,
          "users:\n- name: trainer\n  user:\n    client-key-data: LS0tLS1CRUdJTi" + _B36 + "=", "LS0tLS1CRUdJTi" + _B36 + "=",
          "kubeconfig client-key-data", anchor=_KEYWORDS, before=r"\w.-",
          check=_assignment),
    Shape("SECRET", r"[\"']?[ \t]{0,16}+:[ \t]{0,16}+[\"'](?P<value>[^\"'\s]{8,256}+)",
          '{"username": "alice", "key": "' + _H40[:32] + '"}', _H40[:32], "kaggle.json key",
          anchor=r"(?<=[\"'])key(?=[\"'])"),
    Shape("DOCKER_AUTH", r"[\"']?[ \t]{0,16}+:[ \t]{0,16}+[\"'](?P<value>[^\"'\s]{4,4096}+)",
          '{"auths": {"nvcr.io": {"auth": "JG9hdXRodG9rZW46' + _B36 + '"}}}', "JG9hdXRodG9rZW46" + _B36,
          "Docker config.json auths.<registry>.auth (base64 of user:password)", anchor=r"(?<=[\"'])auth(?=[\"'])"),
    Shape("SECRET", _K8S_VALUE + _VALUE, "env:\n  - name: HF_TOKEN_FILE_PASSWORD\n    value: \"Zq8vR2kL5mN7\"",
          "Zq8vR2kL5mN7", "Kubernetes env entry (name: *_TOKEN / *_PASSWORD, value: ...)",
          anchor=r"(?<![a-z0-9_-])name(?=[\"']?[ \t]{0,16}:)", check=_secret_env_name),
    Shape("SECRET", _K8S_VALUE + _VALUE, '{"name": "WANDB_API_KEY", "value": "' + _H40 + '"}', _H40,
          "Kubernetes env entry as JSON", anchor=r"(?<![a-z0-9_-])name(?=[\"']?[ \t]{0,16}:)",
          check=_secret_env_name),
    Shape("CONNECTION_PASSWORD", r"[ \t]{0,16}+=[ \t]{0,16}+(?P<value>\{[^}\r\n]{1,256}+\}|[^;\s\"'{][^;\s\"']{0,255}+)",
          "Server=db.example.com;Database=runs;Uid=trainer;Pwd=Zq8vR2kL5mN7;", "Zq8vR2kL5mN7",
          "ODBC / ADO.NET connection string Pwd= (PWD= alone is a shell's working directory)", anchor=r";[ \t]{0,8}+pwd"),
    Shape("CONNECTION_PASSWORD", r"[ \t]{0,16}+=[ \t]{0,16}+(?P<value>\{[^}\r\n]{1,256}+\}|[^;\s\"'{][^;\s\"']{0,255}+)",
          "Pwd={Zq8v;R2kL5mN7};Uid=trainer;Server=db", "{Zq8v;R2kL5mN7}", "a connection string that starts with Pwd=",
          anchor=r"(?<![a-z0-9_$.-])pwd(?=[ \t]{0,8}=[ \t]{0,8}(?:\{[^}\r\n]{1,256}\}|[^;\s]{1,256});)"),
    Shape("SECRET", r"[ \t]{0,16}+(?:[是为][ \t]{0,16}+)?[:=][ \t]{0,16}+[“‘]?" + _ZH_VALUE, "数据库密码：Zq8vR2kL5mN7，请勿外传",
          "Zq8vR2kL5mN7", "a password labelled in Chinese (密码：, 密码=, 口令, 密钥, 令牌)", anchor="密码|口令|密钥|令牌"),
    # said in a sentence: the next word, when it is a value and not an ordinary word (looks_like_a_value)
    Shape("SECRET", _ZH_SAID, "数据库密码是Zq8vR2kL5mN8，请勿外传", "Zq8vR2kL5mN8",
          "a password said in Chinese (密码是 X, 口令为 X, 令牌是 X)", anchor="密码|口令|密钥|令牌", check=_ZH_SAID_CHECK),
    Shape("SECRET", _ZH_SAID, "我的密码 Zq8vR2kL5mN8", "Zq8vR2kL5mN8", "a password named in Chinese, then the value (我的密码 X)",
          anchor="密码|口令|密钥|令牌", check=_ZH_SAID_CHECK),
    Shape("SECRET", _SAID, "the db password is Zq8vR2kL5mN8", "Zq8vR2kL5mN8",
          "a password said in a sentence (password is X, pwd was X)", anchor=_SAID_AT, check=_SAID_CHECK),
    Shape("SECRET", _SAID, "the api key is now 'Zq8v-R2kL5mN8pT1x'", "Zq8v-R2kL5mN8pT1x",
          "a key said in a sentence, quoted (api key is now 'X')", anchor=_SAID_AT, check=_SAID_CHECK),
    Shape("SECRET", _SAID, "token 是 Zq8vR2kL5mN8", "Zq8vR2kL5mN8", "a token said in Chinese (token 是 X)", anchor=_SAID_AT,
          check=_SAID_CHECK),
    Shape("SECRET", r"(?P<name>[\w.-]{0,64}+)(?:[ \t]{1,16}+|=)" + _FLAG_VALUE,
          "--hf-token " + _B36, _B36, "detect-secrets KeywordDetector (command-line flags)", anchor=_KEYWORDS, before=r"\w.-",
          check=_flag),
    # -- on a command line: the options that carry a password --------------------------------------------------
    Shape("CLI_PASSWORD", "", "curl -sf -u alice:Zq8vR2kL5-pw https://artifacts.example.com/x", "Zq8vR2kL5-pw",
          "gitleaks curl-auth-user", command="curl",
          options=(("-u", "userpass"), ("--user", "userpass"), ("-U", "userpass"), ("--proxy-user", "userpass"),
                   ("--oauth2-bearer", "value"), ("-b", "value"), ("--cookie", "value"))),
    Shape("CLI_PASSWORD", "", "sshpass -p 'Zq8vR2 kL5mN7' ssh root@node1", "Zq8vR2 kL5mN7", "sshpass -p", command="sshpass",
          options=(("-p", "value"),)),
    Shape("CLI_PASSWORD", "", "docker login -u bob -p Zq8vR2kL5mN7 registry.example.com", "Zq8vR2kL5mN7", "docker login -p",
          command=r"(?:docker|podman|nerdctl|buildah|skopeo|oras|az|helm[ \t]{1,8}registry|helm[ \t]{1,8}repo[ \t]{1,8}add)[ \t]{1,8}login",
          options=(("-p", "value"), ("--password", "value"))),
    Shape("CLI_PASSWORD", "", "mysql -h db -u root -pZq8vR2kL5mN7 train", "Zq8vR2kL5mN7", "mysql -pPASSWORD",
          command="(?:mysql|mysqldump|mysqladmin|mariadb)", options=(("-p", "joined"), ("--password", "joined"))),
    Shape("CLI_PASSWORD", "", "redis-cli -h cache -a Zq8vR2kL5mN7 ping", "Zq8vR2kL5mN7", "redis-cli -a",
          command="redis-cli", options=(("-a", "value"), ("--pass", "value"))),
    Shape("CLI_PASSWORD", "", "wget --http-password=Zq8vR2kL5mN7 https://x.example.com/w.bin", "Zq8vR2kL5mN7", "wget --password",
          command="wget", options=(("--password", "value"), ("--http-password", "value"), ("--ftp-password", "value"),
                                   ("--proxy-password", "value"))),
    Shape("CLI_PASSWORD", "", "openssl pkcs12 -in k.p12 -passin pass:Zq8vR2kL5mN7", "Zq8vR2kL5mN7", "openssl -passin pass:",
          command="openssl", options=(("-passin", "userpass"), ("-passout", "userpass"), ("-pass", "userpass"), ("-k", "value"))),
    Shape("CLI_PASSWORD", "", "aws configure set aws_secret_access_key Zq8vR2kL5mN7pT1xW4yB6", "Zq8vR2kL5mN7pT1xW4yB6",
          "aws configure set", command=r"aws[ \t]{1,8}configure[ \t]{1,8}set",
          options=(("aws_secret_access_key", "value"), ("aws_session_token", "value"))),
    Shape("CLI_PASSWORD", "", "unzip -P Zq8vR2kL5mN7 weights.zip", "Zq8vR2kL5mN7", "unzip/zip -P", command="(?:unzip|zip|7z|7za)",
          options=(("-P", "value"), ("-p", "joined"))),
    # -- a private key whose BEGIN line was cut or lost: its body lines ----------------------------------------
    Shape("PRIVATE_KEY", r"(?<![A-Za-z0-9+/])(?:MII[A-Za-z0-9+/]{61}|b3BlbnNzaC1rZXktdjE[A-Za-z0-9+/]{51})\r?\n"
          r"(?:[A-Za-z0-9+/]{64,76}\r?\n){1,4096}+[A-Za-z0-9+/]{0,76}={0,2}",
          "\n".join(["MIIEow" + (_B36 * 2)[:58]] + [(_B36 * 3)[i : i + 64] for i in (3, 7, 11)]) + "\n" + _B36[:20] + "==",
          (_B36 * 3)[7:71], "a PEM body without its BEGIN line (64- or 70-character base64 lines)"),
    Shape("PRIVATE_KEY", _PEM_BEGIN,
          '{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC' + _B36
          + '\\n-----END PRIVATE KEY-----\\n", "client_email": "x@p.iam.gserviceaccount.com"}',
          "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" + _B36,
          "GCP service-account JSON private_key", finder="pem"),
)

# Where a token begins: its prefix, at the start of a run of token characters. A no-break space inside such a run is
# read as nothing (common.spellings): hf_Zq8vR2kL5m<NBSP>N7pX... is one token, split where a line was wrapped.
TOKEN_PREFIX = re.compile(START + "(?:" + "|".join(dict.fromkeys(
    [*_PREFIXES, "(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])", "[sr]k_(?:live|test|prod)_", "GOOG"])) + ")")

# Strict mode (--redact strict): where a job ran, not only its credentials.
PRIVATE_SHAPES: tuple[Shape, ...] = (
    Shape("HOME", r"/(?:home|Users)/[^/\s:\"']{1,64}+|/root(?![\w.-])", "/home/alice"),
    Shape("HOME", r"~(?<![^\s\"'=:(,]~)[^/\s:\"'~]{0,64}+(?=/)", "~bob/ckpt", "~bob"),
    Shape("IP", r"[0-9]{1,3}+\.[0-9]{1,3}+\.[0-9]{1,3}+(?![0-9])", "10.12.0.7", anchor=r"[0-9]\.(?=[0-9])", before="0-9",
          check=lambda head, whole: _is_ip(whole)),
    Shape("IP", "", "fe80::1ff:fe23:4567:890a", finder="ipv6"),
    Shape("IP", "", "[2001:db8:85a3::8a2e:370:7334]:29500", "2001:db8:85a3::8a2e:370:7334", finder="ipv6"),
    Shape("HOST", "", "gpu-node-17.cluster.internal", finder="hosts"),
    Shape("HOST", "", "db.example.co.uk", finder="hosts"),
    Shape("HOST", "", "ip-10-0-0-1.ec2.internal", finder="hosts"),
    Shape("HOST", "", "trainer-0.trainer.ml.svc.cluster.local", finder="hosts"),
    Shape("HOST", "", "https://models.acme.ai:8443/v1", "models.acme.ai", finder="hosts"),
    Shape("HOST", r"-[0-9]{1,3}-[0-9]{1,3}-[0-9]{1,3}-[0-9]{1,3}(?![0-9a-z])", "ip-10-0-0-1", anchor=r"(?<![a-z0-9-])ip(?=-[0-9])"),
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
                              r"|keyboard|^xkb_|^ssh_auth_sock$|_keymap$|^--?key-?(?:file|path|store)\b|_?key_?(?:file|path)\b"
                              r"|^-*(?:certificate-authority|client-certificate)-data$")


@lru_cache(maxsize=4096)  # the same names come back on every line of a log
def secret_name(name: str) -> bool:
    """Does a variable or option name say its value is a secret (HF_TOKEN, --api-key, db_password)?"""
    return bool(_SECRET_WORD.search(name)) and not _NOT_SECRET_NAME.search(name)


_SECRET_WORD = re.compile(f"(?i){_WORDS}|^-*key$")
