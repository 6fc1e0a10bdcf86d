"""agentd's own secret shapes, where each pattern comes from, and how each ends.

gitleaks' rules (:mod:`.gitleaks`) cover the providers' token formats; these
are the shapes a stream needs written out by hand (a PEM block held to its END
line, ``password: "a quoted value"``, passwords in URLs) and those agentd had
before it took gitleaks' rules.  :mod:`.matcher` runs both in one pass.

Sources
-------
The shapes follow the detectors of Yelp's **detect-secrets** (Apache-2.0,
``detect_secrets/plugins/``: ``aws.py``, ``basic_auth.py``,
``github_token.py``, ``gitlab_token.py``, ``jwt.py``, ``keyword.py``,
``openai.py``, ``private_key.py``, ``slack.py``), rewritten for a byte
stream: each pattern is anchored at a literal (a keyword of the matcher's automaton), says
which part is the secret (the rest is kept: ``password=``, ``Bearer ``,
``https://user:``), and comes with a *partial* form that recognises a secret
that has begun but not ended.  Where they differ from detect-secrets:

* ``sk-`` keys: any ``sk-`` + 20 key characters (OpenAI project and user keys,
  Anthropic ``sk-ant-…``), not only the legacy ``T3BlbkFJ`` form;
* GitHub: 20 or more characters after ``ghp_``/``gho_``/``ghu_``/``ghs_``/
  ``ghr_``, and fine-grained ``github_pat_`` tokens;
* Google API keys (``AIza`` + 35) are not in detect-secrets; the format is
  Google's (also gitleaks' ``gcp-api-key``);
* the keyword list is detect-secrets' ``DENYLIST`` without ``pwd`` (it
  redacted every ``PWD=/path`` of an environment dump) and with ``token``,
  ``credential(s)`` and any ``*_key`` name; a value must be 6 characters or
  more, not only digits, and not a template (``${X}``, ``{{x}}``, ``<x>``);
* the AWS secret access key is 40 base64 characters after a name that holds
  ``aws`` and ``key``/``secret``/``token``/``pass``, quoted or not;
* Azure storage and Service Bus connection strings: the value after
  ``AccountKey=`` or ``SharedAccessKey=`` (20+ base64 characters; not in
  detect-secrets);
* a private key is the *whole* PEM block, ``BEGIN`` line to ``END`` line (or
  to the first byte that cannot be in a block, when the ``END`` line is
  missing).

Environment values (the unit's ``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``,
``*_PASSWORD``, ``*_KEY``, ``*_CREDENTIALS`` and ``API_KEY`` variables) are
matched exactly, by :class:`~supervisor.session.redact.Redactor`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

#: Default upper bound of a held-back secret prefix (bytes of matching text).
TOKEN_CAP = 256
#: A PEM block is held until its END line, up to this many bytes.
PEM_CAP = 16384


@dataclass(frozen=True)
class Shape:
    """One kind of secret.

    ``literals`` are what an occurrence starts with (found by the redactor's
    one automaton, without regard to case; matched on the lowercased text when
    ``lower``); ``full.match(text, hit)`` is a complete occurrence
    and ``partial.match(text, hit)`` (it ends with ``\\Z``) one that may still
    grow.  The secret is group ``v`` when the pattern has one, else the whole
    match.  ``hold`` lists literals whose unfinished beginnings (``s``, ``sk``
    of ``sk-``) are held too, unless preceded by a byte of ``after``.  ``cap``
    bounds what is held; past it the secret is cut out anyway and ``rest``
    swallows what follows of it.  ``accept`` vets a complete value.
    """

    name: str
    literals: tuple[bytes, ...]
    full: re.Pattern[bytes]
    partial: re.Pattern[bytes]
    lower: bool = False
    hold: tuple[bytes, ...] = ()
    after: bytes = b""
    cap: int = TOKEN_CAP
    rest: re.Pattern[bytes] | None = None
    accept: Callable[[bytes], bool] | None = None


def _token(name: str, literals: tuple[bytes, ...], body: str, least: int, before: str,
           end: str = "", most: int | None = None) -> Shape:
    """A shape that is one run of characters starting with one of ``literals``."""
    alts = "|".join(re.escape(lit.decode()) for lit in literals)
    count = f"{{{least},{'' if most is None else most}}}"
    upto = f"{{0,{'' if most is None else most}}}"
    return Shape(
        name,
        literals,
        re.compile(f"(?<![{before}])(?:{alts}){body}{count}{end}".encode()),
        re.compile(f"(?<![{before}])(?:{alts}){body}{upto}\\Z".encode()),
        hold=literals,
        after=_charset(before),
        rest=re.compile(f"{body}*".encode()),
    )


def _charset(cls: str) -> bytes:
    """The bytes of a simple regex character class body such as ``A-Za-z0-9_\\-``."""
    out = bytearray()
    i = 0
    raw = cls
    while i < len(raw):
        ch = raw[i]
        if ch == "\\" and i + 1 < len(raw):
            out.append(ord(raw[i + 1]))
            i += 2
            continue
        if i + 2 < len(raw) and raw[i + 1] == "-":
            out.extend(range(ord(ch), ord(raw[i + 2]) + 1))
            i += 3
            continue
        out.append(ord(ch))
        i += 1
    return bytes(sorted(set(out)))


_KEY = r"A-Za-z0-9_\-"

# -- keyword = value -------------------------------------------------------------
# The name (found on the lowercased text), an optional closing quote, the
# separator, then the value: quoted (may hold blanks) or bare (ends at a blank,
# quote, comma, semicolon or closing bracket).
_KW_NAME = (
    r"(?:passw(?:or)?d|secret|token|credentials?)[a-z0-9_.\-]{0,30}"
    r"|(?:(?<=api)|(?<=[a-z0-9][_\-]))key(?![a-z0-9])"
)
_KW_SEP = r"(?:\\?[\"'])?[ \t]{0,8}(?::=|=>|[:=])[ \t]{0,8}"
_BARE_FIRST = r"[^\s'\"`,;\\<>(){}\[\]$%]"
_BARE_REST = r"[^\s'\"`,;\\<>(){}\[\]]"
_KW_VALUE = (
    r"(?P<v>\"[^\"\r\n]{1,200}\"|'[^'\r\n]{1,200}'|\\\"[^\"\\\r\n]{1,200}\\\""
    r"|" + _BARE_FIRST + _BARE_REST + r"*(?=[\s'\"`,;\\)\]}]|\Z))"
)
_KW_VALUE_PARTIAL = (
    r"(?P<v>\"[^\"\r\n]{0,200}|'[^'\r\n]{0,200}|\\(?:\"[^\"\\\r\n]{0,200}\\?)?"
    r"|" + _BARE_FIRST + _BARE_REST + r"*|)\Z"
)
_NOT_VALUES = frozenset({b"true", b"false", b"none", b"null", b"undefined", b"redacted", b"[redacted]", b"example",
                         b"bearer", b"required", b"optional", b"string"})


def keyword_value_ok(value: bytes) -> bool:
    """A keyword's value worth redacting: 6+ characters, not only digits, not a template or mask."""
    inner = value.strip(b"\\\"'")
    if len(inner) < 6 or inner.lower() in _NOT_VALUES:
        return False
    if inner.strip(b"0123456789.,_-:") == b"" or inner.strip(b"*x.X#") == b"":
        return False
    return not (inner.startswith((b"${", b"{{", b"<", b"%(", b"$(")) or b"[REDACTED]" in inner)


# -- PEM private key blocks --------------------------------------------------------
_PEM_BEGIN = r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
_PEM_BODY = r"(?:(?!-----END)[A-Za-z0-9+/=\s:,.()_\-])"
_PEM_END = r"-----END[A-Z0-9 ]{0,40}-----"

# -- URL credentials (detect-secrets basic_auth.py: RFC 3986 reserved and sub-delims excluded)
_URL_CHAR = r"[^\s:/?#\[\]@!$&'()*+,;=\"<>`\\]"

SHAPES: tuple[Shape, ...] = (
    _token("sk-key", (b"sk-",), f"[{_KEY}]", 20, _KEY),
    _token("github", (b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_", b"github_pat_"),
           "[A-Za-z0-9_]", 20, "A-Za-z0-9_"),
    _token("gitlab", (b"glpat-",), f"[{_KEY}]", 20, _KEY),
    _token("aws-key-id", (b"AKIA", b"ASIA"), "[0-9A-Z]", 16, "A-Za-z0-9", end="(?![0-9A-Z])", most=16),
    _token("slack", (b"xoxa-", b"xoxb-", b"xoxp-", b"xoxo-", b"xoxs-", b"xoxr-"), "[A-Za-z0-9\\-]", 10,
           "A-Za-z0-9"),
    _token("google-api-key", (b"AIza",), f"[{_KEY}]", 35, _KEY),
    Shape(
        "jwt",
        (b"eyJ",),
        re.compile(rb"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_=\-]{10,}\.[A-Za-z0-9_=\-]{10,}(?:\.[A-Za-z0-9_=+/\-]*)?"),
        re.compile(rb"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_=\-]*(?:\.[A-Za-z0-9_=\-]*(?:\.[A-Za-z0-9_=+/\-]*)?)?\Z"),
        hold=(b"eyJ",),
        after=_charset(_KEY),
        rest=re.compile(rb"[A-Za-z0-9_=+/.\-]*"),
    ),
    Shape(
        "private-key",
        (b"-----BEGIN",),
        re.compile(f"{_PEM_BEGIN}{_PEM_BODY}*(?:{_PEM_END})?".encode()),
        re.compile(
            f"-----BEGIN(?:[A-Z0-9 ]{{0,40}}|[A-Z0-9 ]{{0,40}}PRIVATE KEY(?: BLOCK)?-{{0,4}}"
            f"|[A-Z0-9 ]{{0,40}}PRIVATE KEY(?: BLOCK)?-----{_PEM_BODY}*(?:-----END[A-Z0-9 ]{{0,40}}-{{0,4}})?)\\Z".encode()
        ),
        hold=(b"-----BEGIN",),
        cap=PEM_CAP,
        rest=re.compile(f"{_PEM_BODY}*(?:{_PEM_END})?".encode()),
    ),
    Shape(
        "url-password",
        (b"://",),
        re.compile(f"://{_URL_CHAR}{{1,64}}:(?P<v>{_URL_CHAR}{{1,128}})@".encode()),
        re.compile(f"://{_URL_CHAR}{{1,64}}:(?P<v>{_URL_CHAR}{{0,128}})\\Z".encode()),
    ),
    Shape(
        "bearer",
        (b"bearer",),
        re.compile(rb"(?<![a-z0-9_])bearer[ \t]{1,8}(?P<v>[A-Za-z0-9._~+/=\-]{8,})"),
        re.compile(rb"(?<![a-z0-9_])bearer[ \t]{1,8}(?P<v>[A-Za-z0-9._~+/=\-]*)\Z"),
        lower=True,
        rest=re.compile(rb"[A-Za-z0-9._~+/=\-]*"),
    ),
    Shape(
        "aws-secret-key",
        (b"aws",),
        re.compile(rb"aws[a-z0-9_. \-]{0,20}?(?:key|secret|token|pass)[a-z0-9_.\"' :=\[\]\-]{0,20}?"
                   rb"(?<![a-z0-9/+])(?P<v>[a-z0-9/+]{40})(?![a-z0-9/+])"),
        re.compile(rb"aws[a-z0-9_. \-]{0,20}?(?:key|secret|token|pass)[a-z0-9_.\"' :=\[\]\-]{0,20}?"
                   rb"(?<![a-z0-9/+])(?P<v>[a-z0-9/+]{1,40})\Z"),
        lower=True,
    ),
    Shape(
        "azure-storage-key",
        (b"accountkey", b"sharedaccesskey"),
        re.compile(rb"(?:account|sharedaccess)key[ \t]{0,8}=[ \t]{0,8}(?P<v>[a-z0-9+/]{20,}={0,2})"),
        re.compile(rb"(?:account|sharedaccess)key[ \t]{0,8}=[ \t]{0,8}(?P<v>[a-z0-9+/]*={0,2})\Z"),
        lower=True,
        rest=re.compile(rb"[A-Za-z0-9+/=]*"),
    ),
    Shape(
        "keyword",
        (b"passw", b"secret", b"token", b"credential", b"key"),
        re.compile(f"(?:{_KW_NAME}){_KW_SEP}{_KW_VALUE}".encode()),
        re.compile(f"(?:{_KW_NAME}){_KW_SEP}{_KW_VALUE_PARTIAL}".encode()),
        lower=True,
        rest=re.compile(_BARE_REST.encode() + b"*"),
        accept=keyword_value_ok,
    ),
)

__all__ = ["PEM_CAP", "SHAPES", "TOKEN_CAP", "Shape", "keyword_value_ok"]
