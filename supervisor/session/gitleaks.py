"""gitleaks' maintained rule set, read from the vendored ``supervisor/data/gitleaks.toml``.

gitleaks (MIT; version and commit in ``supervisor/data/gitleaks.README.md``)
keeps about 220 secret shapes, each a Go regular expression with *keywords*:
a rule's regex runs only where one of its keywords occurs (lowercase,
matched without regard to case).  This module turns each rule into a
:class:`Rule` for :mod:`.matcher`:

* the Go regex is translated to Python's ``re`` (:func:`translate`): an
  inline flag group in the middle, ``(?i)``, is scoped to the end of its
  group, as Go applies it; ``\\z`` and an unflagged ``$`` become ``\\Z``
  (Go's ``$`` is the end of the text); a ``[`` inside a class is escaped;
* the secret is the rule's ``secretGroup``, else the first group that
  matched, else the whole match (as gitleaks reports it);
* ``entropy`` (Shannon, bits per character of the secret), the rule's
  allowlists (regexes on the secret, the match or the line; stopwords) and
  the global allowlist's regexes and stopwords are kept; allowlists that
  name file paths never apply to a stream and are skipped;
* :data:`DROPPED` lists the rules left out, each with its reason.

How a rule is run where its keyword ``k`` occurs at ``h``: most rules can
begin at the keyword (a token that starts with it, or the
``[\\w.-]{0,50}?name ... = value`` form of the "semi-generic" rules, whose
leading run is lazy), so the regex is *matched at* ``h``.  The few whose
keyword sits inside the secret (Azure's ``…8Q~…``, OpenAI's ``…T3BlbkFJ…``)
are listed in :data:`INNER` with how far before the keyword the match may
begin; they are searched from there to the end of the token.  A match must
contain the keyword occurrence that triggered it, so a keyword far from a
value never makes a bare hex string a secret.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent.parent / "data" / "gitleaks.toml"

#: Rules left out, and why.
DROPPED: dict[str, str] = {
    "generic-api-key": "agentd's own keyword shape (shapes.py) covers names such as password/secret/token/*_key with "
                       "the value held until it ends; this rule's access/auth/api names with entropy 3.5 mask "
                       "ordinary identifiers in agent output (measured on tests/data)",
    "private-key": "shapes.py's PEM shape: the whole block, held to its END line, BEGIN line split included",
    "pkcs12-file": "a rule on file names, no regex",
    "kubernetes-secret-yaml": "a match spans up to 300 characters over many lines; a stream cannot hold that",
    "curl-auth-header": "a match spans up to five lines (curl ... -H); a stream cannot hold that",
    "curl-auth-user": "a match spans up to five lines (curl ... -u); a stream cannot hold that",
    "nuget-config-password": "its secret is any run of characters (blanks and quotes included) up to a quote",
    "lob-api-key": "its keywords test_/live_ begin the value, so every test name of a test run would search for it",
    "lob-pub-api-key": "its keywords test_pub/live_pub/_pub begin the value (see lob-api-key)",
    "airtable-personnal-access-token": "its keyword (airtable) is never part of the match: gitleaks looks for it "
                                       "anywhere in a file, which a stream does not have",
    "facebook-access-token": "its keyword (facebook) is never part of the match (see airtable-personnal-access-token)",
}

#: Rules whose keyword lies inside the secret: how many bytes before the keyword a match may begin.
INNER: dict[str, int] = {
    "azure-ad-client-secret": 8,  # (?:^|[...])xxx9Q~...
    "openai-api-key": 96,  # sk-proj-<74>T3BlbkFJ...
    "hashicorp-tf-api-token": 16,  # <14>.atlasv1....
    "microsoft-teams-webhook": 96,  # https://<org>.webhook.office.com/webhookb2/...
    "sidekiq-sensitive-url": 40,  # https://<8 hex>:<8 hex>@gems.contribsys.com
    "slack-webhook-url": 8,  # https://hooks.slack.com/...
    "freemius-secret-key": 1,  # 'secret_key' => 'sk_...'
    "maxmind-license-key": 40,  # <6>_<29>_mmk
    "new-relic-browser-api-token": 112,  # new_relic ... = NRJS-...: the keyword begins the value
    "new-relic-insert-key": 112,
    "new-relic-user-api-key": 112,
    "typeform-api-token": 112,  # typeform ... = tfp_...
    "sourcegraph-access-token": 0,  # sgp_... (its bare 40-hex form would need the keyword inside the match: never)
}

#: Rules whose first group is only a piece of the token (a repeated or named part): the whole match is the secret.
WHOLE_MATCH = frozenset({"microsoft-teams-webhook", "jwt-base64"})


@dataclass(frozen=True)
class Rule:
    """One gitleaks rule, translated."""

    id: str
    keywords: tuple[bytes, ...]  # lowercase
    regex: re.Pattern[bytes]
    group: int  # the secretGroup; 0: the first group that matched (else the whole match); -1: the whole match
    entropy: float
    back: int | None  # None: matched at the keyword; else searched from this many bytes before it
    starts_token: bool  # the keyword begins the secret (not inside it, not a name before it)
    semi: bool  # "name ... = value": the keyword is a name before the secret
    cased: tuple[bytes, ...] = ()  # the keywords as the regex spells them, when it takes no other case
    boundary: bool = False  # the regex begins with \b at its keyword: no match begins after a word byte
    allow_secret: tuple[re.Pattern[bytes], ...] = ()
    allow_match: tuple[re.Pattern[bytes], ...] = ()
    allow_line: tuple[re.Pattern[bytes], ...] = ()
    stopwords: tuple[bytes, ...] = ()

    def secret_span(self, m: re.Match[bytes]) -> tuple[int, int]:
        """Where the secret is in match ``m`` (as gitleaks reports it)."""
        if self.group:
            return m.span(self.group) if self.group > 0 else m.span()
        for i in range(1, (m.re.groups or 0) + 1):
            s, e = m.span(i)
            if e > s:
                return s, e
        return m.span()

    def allowed(self, text: bytes, m: re.Match[bytes], secret: tuple[int, int]) -> bool:
        """Whether the rule lets this match go (entropy too low, an allowlist, a stopword)."""
        value = text[secret[0]:secret[1]]
        if self.entropy and shannon(value) <= self.entropy:  # gitleaks skips entropy <= the rule's
            return True
        lowered = value.lower()
        if any(word in lowered for word in self.stopwords) or any(p.search(value) for p in self.allow_secret):
            return True
        if any(p.search(m.group()) for p in self.allow_match):
            return True
        if self.allow_line:
            start = text.rfind(b"\n", 0, m.start()) + 1
            end = text.find(b"\n", m.end())
            line = text[start:end if end != -1 else len(text)]
            return any(p.search(line) for p in self.allow_line)
        return False


def shannon(data: bytes) -> float:
    """Shannon entropy of ``data`` in bits per byte (gitleaks' ``entropy``)."""
    if not data:
        return 0.0
    n = len(data)
    return -sum(c / n * math.log2(c / n) for c in Counter(data).values())


# -- Go regex -> Python re ------------------------------------------------------------
_FLAGS = re.compile(r"\(\?([imsU-]+)\)")
_POSIX = re.compile(r"\[:(alnum|alpha|digit|lower|upper|xdigit|space|punct|word):\]")
_POSIX_CLASSES = {"alnum": "A-Za-z0-9", "alpha": "A-Za-z", "digit": "0-9", "lower": "a-z", "upper": "A-Z",
                  "xdigit": "0-9A-Fa-f", "space": "\\t\\n\\v\\f\\r ", "word": "\\w",
                  "punct": "!-/:-@\\[-`{-~"}


def translate(go: str) -> str:
    """A Go (RE2) regular expression as Python ``re`` source (see the module docstring)."""
    out: list[str] = []
    scoped = [0]  # per open group (the whole pattern first): scoped flag groups to close with it
    i, n = 0, len(go)
    in_class = False
    while i < n:
        ch = go[i]
        if ch == "\\" and i + 1 < n:
            out.append("\\Z" if go[i + 1] == "z" else go[i:i + 2])
            i += 2
        elif in_class:
            posix = _POSIX.match(go, i)
            if posix is not None:
                out.append(_POSIX_CLASSES[posix.group(1)])
                i = posix.end()
                continue
            if ch == "]" and not _class_start(go, i):
                in_class = False
            out.append("\\[" if ch == "[" else ch)
            i += 1
        elif ch == "[":
            in_class = True
            out.append(ch)
            i += 1
        elif ch == "$":
            out.append("\\Z")
            i += 1
        elif (m := _FLAGS.match(go, i)) is not None:
            if i == 0:
                out.append(m.group(0))  # Python takes global flags at the start only
            else:
                out.append(f"(?{m.group(1)}:")  # Go applies them to the end of the enclosing group
                scoped[-1] += 1
            i = m.end()
        else:
            if ch == "(":
                scoped.append(0)
            elif ch == ")" and len(scoped) > 1:
                out.append(")" * scoped.pop())
            out.append(ch)
            i += 1
    out.append(")" * scoped[0])
    return "".join(out)


def _class_start(go: str, i: int) -> bool:
    """Whether ``]`` at ``i`` is a literal first member of a class (``[]...]`` or ``[^]...]``)."""
    return go[i - 1] == "[" or (go[i - 1] == "^" and i >= 2 and go[i - 2] == "[")


# -- loading ----------------------------------------------------------------------------
#: How gitleaks' generated rules end a secret (a blank, a quote, a semicolon, an escaped newline, the end)...
_TOKEN_END = "(?:[\\x60'\"\\s;]|\\\\[nr]|$)"
#: ... and how agentd ends it: also at the punctuation that follows a token in prose and paths (a full stop,
#: a comma, a colon, a slash, a closing bracket, ``&``, ``?``, ``|``, ``>``), so a key in a sentence or in a
#: file name (``src/sk_live_….txt``) is still a key.
_TOKEN_END_HERE = "(?:[\\x60'\"\\s;.,:/)\\]}>|&?]|\\\\[nr]|$)"
#: The lazy run before a "name = value" rule's name: it only widens the match to the left (the secret is the same),
#: and a match begun at the keyword would try it 50 times over where the name is not followed by a value.
_LAZY_NAME_RUN = "[\\w.-]{0,50}?"
_SEMI = re.compile(r"(?:\(\?i\))?\[\\w\.-\]\{0,50\}\?\(\?(?:i)?:")


class _Lazy:
    """A translated regex compiled at its first use: most rules never meet their keyword (and a CLI command
    that redacts one line should not compile 200 regexes)."""

    __slots__ = ("source", "_compiled")

    def __init__(self, source: bytes) -> None:
        self.source = source
        self._compiled: re.Pattern[bytes] | None = None

    def __getattr__(self, name: str) -> Any:  # match, search, finditer, pattern, flags ...
        if self._compiled is None:
            self._compiled = re.compile(self.source)
        return getattr(self._compiled, name)


def _compile(go: str) -> re.Pattern[bytes]:
    return _Lazy(translate(go).encode())  # type: ignore[return-value]


def _allowlists(spec: dict) -> tuple[list[re.Pattern[bytes]], list[re.Pattern[bytes]], list[re.Pattern[bytes]], list[bytes]]:
    """(secret, match, line) regexes and stopwords of a rule's allowlists that can apply to a stream."""
    secret: list[re.Pattern[bytes]] = []
    match: list[re.Pattern[bytes]] = []
    line: list[re.Pattern[bytes]] = []
    stop: list[bytes] = []
    for allow in spec.get("allowlists", ()):
        if allow.get("paths") and allow.get("condition", "OR").upper() == "AND":
            continue  # needs a file path: never true for a stream
        target = {"secret": secret, "match": match, "line": line}[allow.get("regexTarget", "secret")]
        target.extend(_compile(r) for r in allow.get("regexes", ()))
        stop.extend(w.lower().encode() for w in allow.get("stopwords", ()))
    return secret, match, line, stop


def _cased(source: bytes, keywords: list[str]) -> tuple[bytes, ...]:
    """How a case-sensitive regex spells each keyword (``SK`` of twilio's ``sk``); () when any case may match."""
    if source.startswith(b"(?i"):
        return ()
    spelled = []
    for keyword in keywords:
        m = re.search(re.escape(keyword.encode()), source, re.IGNORECASE)
        if m is None:
            return ()
        spelled.append(m.group())
    return tuple(spelled)


@lru_cache(maxsize=1)
def load(path: Path = DATA) -> tuple[Rule, ...]:
    """The kept rules of the vendored gitleaks configuration (translated and compiled once)."""
    with open(path, "rb") as f:
        config = tomllib.load(f)
    glob = config.get("allowlist", {})
    glob_secret = tuple(_compile(r) for r in glob.get("regexes", ()))
    glob_stop = tuple(w.lower().encode() for w in glob.get("stopwords", ()))
    rules: list[Rule] = []
    for spec in config["rules"]:
        rid = spec["id"]
        if rid in DROPPED or "regex" not in spec or not spec.get("keywords"):
            continue
        secret, match, line, stop = _allowlists(spec)
        semi = _SEMI.match(spec["regex"]) is not None
        source = spec["regex"].replace(_LAZY_NAME_RUN, "") if semi else spec["regex"]
        source = source.replace(_TOKEN_END, _TOKEN_END_HERE)
        back = INNER.get(rid)
        regex = _compile(source)
        rules.append(Rule(
            id=rid,
            keywords=tuple(sorted({k.lower().encode() for k in spec["keywords"]})),
            regex=regex,
            group=-1 if rid in WHOLE_MATCH else int(spec.get("secretGroup", 0)),
            entropy=float(spec.get("entropy", 0.0)),
            back=back,
            starts_token=not semi and back is None,
            cased=_cased(regex.source, spec["keywords"]),  # type: ignore[attr-defined]
            boundary=back is None and not semi and re.match(rb"(?:\(\?i\))?\\b", regex.source) is not None,  # type: ignore[attr-defined]
            semi=semi,
            allow_secret=glob_secret + tuple(secret),
            allow_match=tuple(match),
            allow_line=tuple(line),
            stopwords=glob_stop + tuple(stop),
        ))
    return tuple(rules)


__all__ = ["DATA", "DROPPED", "INNER", "WHOLE_MATCH", "Rule", "load", "shannon", "translate"]
