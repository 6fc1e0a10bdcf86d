"""The one-pass matcher (session/matcher.py), its rules (gitleaks.py, shapes.py) and views (unwrap.py), alone.

Pure and fast: no process, no file.  What each shape takes and what it leaves
at its edges, the Go-to-Python translation, every kept gitleaks rule on
samples drawn from its own regex, what a stream holds back and why, wrapped
and boxed secrets, and that any split of a stream redacts like the whole.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.session import gitleaks
from supervisor.session.gitleaks import DROPPED, INNER, WHOLE_MATCH, load, shannon, translate
from supervisor.session.matcher import Matcher
from supervisor.session.redact import (MIN_ENV_SECRET_LEN, Redactor, is_secret_env_name, redact_text, redact_value,
                                       secret_env_values)
from supervisor.session.shapes import PEM_CAP, SHAPES, TOKEN_CAP, _charset, keyword_value_ok
from supervisor.session.unwrap import local_view, needs_view
from tests.secret_samples import secret_of

R = Redactor()
G = "│".encode()


def red(text: bytes, **kw: object) -> bytes:
    return Redactor(**kw).redact(text) if kw else R.redact(text)  # type: ignore[arg-type]


# -- agentd's own shapes, at their edges ----------------------------------------------------

CAUGHT = [
    (b"x sk-" + b"a" * 20 + b" y", b"x [REDACTED] y"),
    (b"ghp_" + b"A" * 20, b"[REDACTED]"), (b"gho_" + b"1" * 20, b"[REDACTED]"), (b"ghu_" + b"b" * 20, b"[REDACTED]"),
    (b"ghs_" + b"c" * 20, b"[REDACTED]"), (b"ghr_" + b"d" * 20, b"[REDACTED]"),
    (b"github_pat_" + b"e" * 20, b"[REDACTED]"), (b"glpat-" + b"f" * 20, b"[REDACTED]"),
    (b"AKIA" + b"Z" * 16, b"[REDACTED]"), (b"ASIA" + b"7" * 16 + b".", b"[REDACTED]."),
    (b"xoxa-" + b"1" * 10, b"[REDACTED]"), (b"xoxp-" + b"a" * 10, b"[REDACTED]"), (b"xoxo-" + b"b" * 10, b"[REDACTED]"),
    (b"xoxs-" + b"c" * 10, b"[REDACTED]"), (b"xoxr-" + b"d" * 10, b"[REDACTED]"), (b"xoxb-" + b"e" * 10, b"[REDACTED]"),
    (b"AIza" + b"Q" * 35, b"[REDACTED]"),
    (b"eyJ" + b"a" * 10 + b"." + b"b" * 10, b"[REDACTED]"),
    (b"-----BEGIN PRIVATE KEY-----\nQUJD\n-----END PRIVATE KEY-----\nok", b"[REDACTED]\nok"),
    (b"-----BEGIN EC PRIVATE KEY-----\nQUJD", b"[REDACTED]"),
    (b"https://u:p@h", b"https://u:[REDACTED]@h"),
    (b"Bearer abcdefgh", b"Bearer [REDACTED]"), (b"BEARER\tabcdefgh", b"BEARER\t[REDACTED]"),
    (b"AWS_SECRET_ACCESS_KEY=" + b"a/+B" * 10, b"AWS_SECRET_ACCESS_KEY=[REDACTED]"),
    (b"aws secret key " + b"a/+B" * 10, b"aws secret key [REDACTED]"),
    (b"AccountKey=" + b"Ab+/" * 5 + b"==;x", b"AccountKey=[REDACTED];x"),
    (b"SharedAccessKey = " + b"c" * 20, b"SharedAccessKey = [REDACTED]"),
    (b"passwd: abc123", b"passwd: [REDACTED]"), (b"password=hunter2", b"password=[REDACTED]"),
    (b"DB_PASSWORD=hunter2x", b"DB_PASSWORD=[REDACTED]"), (b"password=a$b%cdef", b"password=[REDACTED]"),
    (b"credential := xyz789", b"credential := [REDACTED]"), (b"credentials=>'a b c d'", b"credentials=>[REDACTED]"),
    (b"api_key: 'k3y-v4l'", b"api_key: [REDACTED]"), (b"apikey=zzzzzz1", b"apikey=[REDACTED]"),
    (b"x-token: \\\"quoted1\\\"", b"x-token: [REDACTED]"), (b'secret"  : "s3cr3t!"', b'secret"  : [REDACTED]'),
]
LEFT = [
    b"x sk-" + b"a" * 19 + b" y", b"ask-" + b"a" * 20, b"ghp_" + b"A" * 19, b"xghp_" + b"A" * 20,
    b"AKIA" + b"Z" * 15, b"AKIA" + b"Z" * 17, b"akia" + b"z" * 16, b"xoxz-" + b"1" * 10, b"xoxb-" + b"1" * 9,
    b"AIza" + b"Q" * 34, b"eyJ" + b"a" * 9 + b"." + b"b" * 10, b"https://user@host/p", b"bearer short",
    b"aws secret key " + b"a/+B" * 9 + b"a/+", b"aws secret key " + b"a/+B" * 10 + b"a", b"AccountKey=" + b"c" * 19,
    b"password: short", b"password: 1234567", b"token: ********", b"secret: <yours>", b"token: ${TOKEN}",
    b"password: {{pw}}", b"token: true", b"secret: [REDACTED]x", b"keyboard=qwertyuiop", b"monkey=banana99",
    b"-----BEGIN CERTIFICATE-----\nQUJD\n-----END CERTIFICATE-----", b"://:@", b"sk_test", b"npm_short",
    b"password=$PASSWORD_FROM_ENV", b"password=%PASSWORD_VAR%",
]


@pytest.mark.parametrize(("text", "expected"), CAUGHT, ids=lambda v: v[:24].decode(errors="replace"))
def test_each_shape_is_cut_out_with_its_edges_kept(text: bytes, expected: bytes) -> None:
    assert red(text) == expected


@pytest.mark.parametrize("text", LEFT, ids=lambda v: v[:24].decode(errors="replace"))
def test_what_is_not_a_secret_is_left_alone(text: bytes) -> None:
    assert red(text) == text


def test_keyword_values_are_vetted() -> None:
    assert keyword_value_ok(b"abc123") is True and keyword_value_ok(b"'ab cd e'") is True
    for value in (b"abc12", b"'12345678'", b"1.2.3-4_5:6", b"********", b"xxxxxx", b"......", b"NULL",
                  b"Example", b"${X_Y}", b"{{ pw }}", b"<your-key>", b"%(pw)s", b"$(cat f)", b"a[REDACTED]b"):
        assert keyword_value_ok(value) is False, value


def test_a_character_class_is_spelled_out() -> None:
    assert _charset("a-c_\\-") == b"-_abc"
    assert _charset("A-Za-z0-9") == bytes(sorted(set(range(65, 91)) | set(range(97, 123)) | set(range(48, 58))))
    assert _charset("x\\") == b"\\x"  # a backslash at the very end is itself
    assert _charset("\\]a") == b"]a" and _charset("ab-") == b"-ab" and _charset("a-") == b"-a"
    assert _charset("\\--/") == b"-/"  # an escaped byte is itself, never a range's start


def test_the_shapes_and_their_caps_are_what_the_readme_says() -> None:
    assert [s.name for s in SHAPES] == ["sk-key", "github", "gitlab", "aws-key-id", "slack", "google-api-key", "jwt",
                                        "private-key", "url-password", "bearer", "aws-secret-key",
                                        "azure-storage-key", "keyword"]
    assert TOKEN_CAP == 256 and PEM_CAP == 16 * 1024  # "a cap (256 bytes; 16 KiB for a PEM block ...)"


# -- the environment's values -----------------------------------------------------------

def test_env_values_of_secret_names_from_eight_characters() -> None:
    env = {"A_TOKEN": "abcd1234", "B_KEY": "abcd123", "HOME": "/home/longer-path", "API_KEY": "Zz9#Zz9#Zz",
           "X_PASSWORD": "p4ss word", "Y_SECRET": "s3cr3t-s3", "Z_CREDENTIALS": "c" * 8, "W_API_KEY": "w" * 9}
    assert MIN_ENV_SECRET_LEN == 8
    assert secret_env_values(env) == tuple(sorted(v.encode() for k, v in env.items() if k not in ("B_KEY", "HOME")))
    assert is_secret_env_name("gh_token") and not is_secret_env_name("TOKENS") and not is_secret_env_name("KEYBOARD")
    r = Redactor(env)
    assert r.redact(b"[abcd1234] abcd123 ABCD1234") == b"[[REDACTED]] abcd123 ABCD1234"  # exact, case and all
    assert r.redact(b"v=p4ss word;") == b"v=[REDACTED];"
    assert redact_text("x Zz9#Zz9#Zz y", env) == "x [REDACTED] y" and redact_text("x Zz9#Zz9#Zz y") == "x Zz9#Zz9#Zz y"
    assert redact_text("keep abcd1234", {"HOME": "abcd1234"}) == "keep abcd1234"


def test_redact_value_walks_dicts_and_lists() -> None:
    key = "ghp_" + "A" * 30
    got = redact_value({"a": [key, 3, {"b": (key,)}], key: None, "n": 1.5})
    assert got == {"a": ["[REDACTED]", 3, {"b": ["[REDACTED]"]}], key: None, "n": 1.5}


# -- gitleaks: translation and loading ----------------------------------------------------

@pytest.mark.parametrize(("go", "py"), [
    (r"dp\.pt\.(?i)[a-z0-9]{43}", r"dp\.pt\.(?i:[a-z0-9]{43})"),
    (r"(?i)\b(npm_[a-z0-9]{36})(?:[;]|$)", r"(?i)\b(npm_[a-z0-9]{36})(?:[;]|\Z)"),
    (r'a(?:"(?i)(?:x|y)z)b\z', r'a(?:"(?i:(?:x|y)z))b\Z'),
    (r"(x(?-i)y)(z)", r"(x(?-i:y))(z)"),
    (r"[[:alnum:]][[:xdigit:]]", r"[A-Za-z0-9][0-9A-Fa-f]"),
    (r"[a[b]c[^]x]", r"[a\[b]c[^]x]"),
    (r"[$]\$x$", r"[$]\$x\Z"),
])
def test_go_regexes_are_translated(go: str, py: str) -> None:
    assert translate(go) == py


def test_the_kept_rules() -> None:
    rules = {r.id: r for r in load()}
    assert len(rules) >= 200 and not set(DROPPED) & set(rules)
    assert {"stripe-access-token", "npm-access-token", "huggingface-access-token", "openai-api-key"} <= set(rules)
    assert all(r.keywords and all(k == k.lower() for k in r.keywords) for r in rules.values())
    for rid, back in INNER.items():
        assert rules[rid].back == back and not rules[rid].starts_token
    assert rules["cohere-api-token"].semi and not rules["cohere-api-token"].starts_token
    assert rules["stripe-access-token"].starts_token and rules["stripe-access-token"].back is None
    assert b"{0,50}?" not in rules["cohere-api-token"].regex.pattern  # its lazy name run is gone
    assert all(rules[rid].group == -1 for rid in WHOLE_MATCH)
    aws = rules["aws-access-token"]
    assert aws.entropy == 3.0 and any(p.search(b"AKIAIOSFODNN7EXAMPLE") for p in aws.allow_secret)
    assert b"abcdefghijklmnopqrstuvwxyz" in aws.stopwords


def test_a_rules_secret_and_what_lets_it_go() -> None:
    rule = gitleaks.Rule("t", (b"k_",), __import__("re").compile(rb"(x)?k_(\w+)(?P<n>!)?"), 0, 2.0, None, True, False,
                         allow_secret=(__import__("re").compile(rb"^zz"),), stopwords=(b"fake",),
                         allow_line=(__import__("re").compile(rb"^#"),))
    m = rule.regex.search(b"k_abcd")
    assert rule.secret_span(m) == (2, 6)
    assert rule.secret_span(rule.regex.search(b"xk_ab")) == (0, 1)
    assert gitleaks.Rule("w", (b"k",), rule.regex, -1, 0, None, True, False).secret_span(m) == (0, 6)
    assert gitleaks.Rule("g", (b"k",), rule.regex, 2, 0, None, True, False).secret_span(m) == (2, 6)
    text = b"ok k_abcde\n# k_abcde\nk_aaaa k_zzabc k_fakex"
    verdicts = [rule.allowed(text, m, rule.secret_span(m)) for m in rule.regex.finditer(text)]
    assert verdicts == [False, True, True, True, True]  # fine; a comment line; entropy 0; allowlisted; stopword
    assert shannon(b"") == 0 and shannon(b"aaaa") == 0 and shannon(b"ab") == 1 and shannon(b"abcd") == 2


@pytest.mark.parametrize("rule", load(), ids=lambda r: r.id)
def test_every_kept_gitleaks_rule_is_caught_on_samples_of_its_own_regex(rule: gitleaks.Rule) -> None:
    for seed in range(3):
        drawn = secret_of(rule, seed)
        assert drawn is not None, f"no sample of {rule.id}"
        line, secret = drawn
        out = R.redact(line)
        assert secret not in out and b"[REDACTED]" in out, (rule.id, line, out)


def test_a_keyword_far_from_a_value_makes_no_secret() -> None:
    sha = b"1f0e3dad99908345f7439f8ffabdffc4deadbeef"
    assert red(b"sourcegraph " + sha) == b"sourcegraph " + sha  # its bare-hex form needs the keyword inside
    assert red(b"sgp_1f0e3dad99908345f7439f8ffabdffc4deadbeef ") == b"[REDACTED] "


def test_a_token_ends_at_punctuation_too() -> None:
    key = b"sk_live_9Zx8Wv7Ut6Sr5Qp4On3Ml2Kj1Ih0"
    for after in (b".txt", b".", b",", b":", b"/x", b")", b"]", b"}", b">", b"|", b"&", b"?"):
        assert red(b"src/" + key + after) == b"src/[REDACTED]" + after, after
    assert red(key + b"-more") == key + b"-more"  # a longer token of another kind: not this one


# -- what a stream holds back ----------------------------------------------------------------

def test_a_gitleaks_token_is_held_until_it_ends_and_nothing_else() -> None:
    r = Redactor()
    assert r.feed(b"pay sk_live_4eC39Hq") == b"pay " and r.pending == len(b"sk_live_4eC39Hq")
    assert r.feed(b"") == b"" and r.pending == len(b"sk_live_4eC39Hq")
    assert r.feed(b"LyjWDarjtT1zdp7dc ok\r\n") == b"[REDACTED] ok\r\n"
    assert r.feed(b"start sk_li") == b"start "  # an unfinished keyword at a word's start
    assert r.feed(b"ve_4eC39HqLyjWDarjtT1zdp7dc\n") == b"[REDACTED]\n"
    for tail in (b"fake> ", b"Running tests", b"ok ask_li", b"done; ", b"wait (y/n)", b"tasks", b"hello monkey",
                 b"they", b"args."):
        r = Redactor()
        assert r.feed(tail) == tail and r.pending == 0, tail
    r = Redactor()
    assert r.feed(b"cohere_key = ") == b"cohere_key = "
    assert r.feed(b"Abc") == b"" and r.pending == 3  # the value of a name = value rule
    assert r.feed(b"dEfGhIjKlMnOpQrStUvWxYz0123456789AbCdE\n") == b"[REDACTED]\n"


def test_a_token_too_long_to_hold_is_cut_out_with_the_rest_of_it() -> None:
    r = Redactor()
    blob = bytes((i * 7919 + i // 5) % 26 + (65 if i % 3 else 97) for i in range(2100))
    out = r.feed(b"x ops_eyJ") + b"".join(r.feed(blob[i:i + 700]) for i in range(0, len(blob), 700))
    assert r.pending <= r.max_hold
    out += r.feed(b" tail\n") + r.flush()
    assert out == b"x [REDACTED] tail\n"


# -- wrapped and boxed ----------------------------------------------------------------------

KEY = b"sk-proj-Q7vB2mX9kL4pT8wR1nZ6yH3jF5dS0aGcEabcdefghijKLMNOPqrstuv0123456789AbCdEfGhIjKlMnOp"
PEM = [b"MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgwMbRvI0MBZhpF", b"q2bWxyzQ7vB2mX9kL4pT8wR1nZ6yH3jF5dS0aGcE=="]
BOXED = G + b" key: " + KEY[:50] + b" " + G + b"\r\n" + G + b" " + KEY[50:] + b" and more       " + G + b"\r\n"
DRAWN = G + b" key: " + KEY[:50] + b" " + G + G + b" " + KEY[50:] + b" more " + G  # rows by cursor moves: no break
GUTTER = b"Read key.pem\r\n" + b"\r\n".join(b"  " + G + b" " + line for line in
                                          [b"-----BEGIN RSA PRIVATE KEY-----", *PEM, b"-----END RSA PRIVATE KEY-----"])
GUTTER += b"\r\n  " + G + b" done\r\n"
WRAPPED = b"  key " + KEY[:74] + b"\r\n  " + KEY[74:] + b" end\r\nnext line\r\n"  # the first line is 80 wide


def test_a_key_over_two_box_rows_is_cut_out_of_both() -> None:
    assert red(BOXED) == G + b" key: [REDACTED] " + G + b"\r\n" + G + b"  and more       " + G + b"\r\n"
    assert red(DRAWN) == G + b" key: [REDACTED] " + G + G + b"  more " + G


def test_a_pem_block_in_a_gutter_is_cut_out_whole() -> None:
    out = red(GUTTER)
    assert out.startswith(b"Read key.pem\r\n  " + G + b" [REDACTED]") and out.endswith(b"  " + G + b" done\r\n")
    assert not any(line[:12] in out for line in PEM) and b"-----END" not in out


def test_a_full_line_is_joined_only_with_the_terminals_width() -> None:
    assert red(WRAPPED, cols=80) == b"  key [REDACTED]\r\n   end\r\nnext line\r\n"
    assert KEY[74:] in red(WRAPPED) and KEY[74:] in red(WRAPPED, cols=120)  # not full: another line
    dump = b"OPENAI_API_KEY=" + KEY + b"\r\nNEXT_VAR=plain\r\n"
    assert red(dump, cols=200) == b"OPENAI_API_KEY=[REDACTED]\r\nNEXT_VAR=plain\r\n"
    short = b"id " + KEY[:21] + b"\r\nab cd\r\n"  # alone too short for a key; with the next line's word, one
    assert red(short, cols=24) == b"id [REDACTED]\r\n cd\r\n" and red(short, cols=26) == short


def test_the_view_maps_its_pieces_back() -> None:
    text = b"ab " + G + b"\r\n" + G + b" cd\r\n  " + G + b" ef"
    view = local_view(text, 0, len(text))
    assert view is not None and view.text == b"abcd\r\nef" and not view.open_end and view.to_end
    assert view.spans(1, 4) == [(1, 2), (text.index(b"cd"), text.index(b"cd") + 2)]
    assert view.at(2) == text.index(b"cd") and view.offset(text.index(b"ef")) == 6 and view.at(8) == len(text)
    assert local_view(b"plain\r\ntext", 0, 11) is None and not needs_view(b"plain\r\ntext", 0, 11, None)
    assert needs_view(b"plain\r\ntext", 0, 11, 80) and needs_view(b"a\r\n\xe2", 0, 4, None)
    tail = local_view(b"ab " + G + b"\r\n", 0, 8)
    assert tail is not None and tail.text == b"ab" and tail.open_end
    assert local_view(b"ab\r\n  \xe2\x94", 0, 8).text == b"ab\r\n"  # a gutter's first bytes: held, not shown


@pytest.mark.parametrize("data", [BOXED, DRAWN, GUTTER, WRAPPED], ids=["boxed", "drawn", "gutter", "wrapped"])
def test_a_wrapped_or_boxed_secret_split_anywhere_is_redacted_as_whole(data: bytes) -> None:
    expected = red(data, cols=80)
    for cut in range(len(data) + 1):
        r = Redactor(cols=80)
        assert r.feed(data[:cut]) + r.feed(data[cut:]) + r.flush() == expected, cut


# -- any split of a stream -------------------------------------------------------------------

STREAM = b"".join([
    b"pay sk_live_4eC39HqLyjWDarjtT1zdp7dc now\r\n", b"npm_Q7vB2mX9kL4pT8wR1nZ6yH3jF5dS0aGcE1x2\r\n",
    b"HF 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 ok\r\n", b"cohere_key = AbcdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdE\r\n",
    b"AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsu==;\r\n", b"\x1b[32mrk_live_51H8\x1b[0maQ2eZvKYlo2C\r\n",
    BOXED, GUTTER, b"the task is done; tests pass\r\nfake> ",
])


@settings(max_examples=300, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=10))
def test_any_split_of_the_stream_is_redacted_as_the_whole(cuts: list[int]) -> None:
    expected = Redactor().redact(STREAM)
    r = Redactor()
    out, prev = [], 0
    for cut in sorted(cuts) + [len(STREAM)]:
        out.append(r.feed(STREAM[prev:cut]))
        prev = cut
    assert b"".join(out) + r.flush() == expected
    assert expected.count(b"[REDACTED]") == 8 and b"the task is done; tests pass" in expected


def test_one_automaton_per_set_of_secret_values() -> None:
    assert Redactor({"A_TOKEN": "abcdefgh"})._matcher is Redactor({"B_TOKEN": "abcdefgh"})._matcher
    assert Redactor()._matcher is not Redactor({"A_TOKEN": "abcdefgh"})._matcher
    m = Matcher((b"Value123",))
    assert m.env_values == (b"Value123",)
    spans, cut, rest = m.scan(b"x Value123 value123", 0, True)
    assert spans == [(2, 10, True)] and cut == 19 and rest is None


# -- what is kept in the raw view but is no text: window titles and other terminal strings ----------

STRIPE_KEY = b"sk_live_4eC39HqLyjWDarjtT1zdp7dc"
GH_KEY = b"ghp_R4nD0mT0k3nV4lu3F0rT3st1ngXyZ987654"


@pytest.mark.parametrize(("before", "key", "after"), [
    (b"a \x1b]0;title ", STRIPE_KEY, b"\x07ok\r\n"),  # OSC ended by BEL
    (b"a \x1b]2;", STRIPE_KEY, b"\x1b\\ok\r\n"),  # OSC ended by ST
    (b"x \x1bP", STRIPE_KEY, b"\x1b\\ ok\r\n"),  # DCS
    (b"x \x1b_", GH_KEY, b"\x1b\\ ok\r\n"),  # APC
])
def test_a_key_in_a_terminal_string_is_cut_out_of_the_raw_view_for_any_split(before: bytes, key: bytes,
                                                                               after: bytes) -> None:
    data = before + key + after
    expected = before + b"[REDACTED]" + after
    assert red(data) == expected
    for cut in range(len(data) + 1):
        r = Redactor()
        assert r.feed(data[:cut]) + r.feed(data[cut:]) + r.flush() == expected, cut


def test_an_unended_terminal_string_is_held_until_it_ends() -> None:
    r = Redactor()
    assert r.feed(b"x \x1b]0;sk_live_4eC39Hq") == b"x " and r.pending == len(b"\x1b]0;sk_live_4eC39Hq")
    assert r.feed(b"LyjWDarjtT1zdp7dc\x07y") == b"\x1b]0;[REDACTED]\x07y"
    assert r.feed(b"z \x1b") == b"z " and r.feed(b"[1m. ") == b"\x1b[1m. "  # a lone ESC waits for its next byte


def test_an_invisible_character_inside_a_key_does_not_split_it() -> None:
    key = "sk-proj-Q7vB2mX9kL{}4pT8wR1nZ6yH3jF5dS0aGcE"
    for invisible in ("\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"):
        out = red(f"x {key.format(invisible)} ok".encode())
        assert out.startswith(b"x [REDACTED]") and out.endswith(b" ok") and b"4pT8wR1n" not in out, invisible
    assert red("a\u200bb plain".encode()) == "a\u200bb plain".encode()  # the raw view keeps them


# -- ordinary output is left alone -------------------------------------------------------------

def _ordinary() -> dict[str, bytes]:
    import json
    from pathlib import Path

    from bench.child import line
    from supervisor.fakeagent.work import flood_payload, work_lines

    texts: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    for path in sorted((Path(__file__).parent / "data").glob("*.jsonl")):
        for row in path.read_text().splitlines():
            walk(json.loads(row))
    return {
        "fake agent (colour)": "".join(x + "\r\n" for x in work_lines(2000, True)).encode(),
        "fake agent": "".join(x + "\r\n" for x in work_lines(2000, False)).encode(),
        "fake agent flood": flood_payload(100_000),
        "bench child": b"".join(line(i, 100) for i in range(1000)).replace(b"\n", b"\r\n"),
        "real transcripts (tests/data)": "\r\n".join(texts).encode(),
    }


@pytest.mark.parametrize("name", sorted(_ordinary()))
def test_ordinary_agent_output_is_not_masked(name: str) -> None:
    text = _ordinary()[name]
    assert len(text) > 10_000
    assert red(text, cols=120) == text
    r = Redactor(cols=120)
    assert b"".join(r.feed(text[i:i + 4096]) for i in range(0, len(text), 4096)) + r.flush() == text


# -- the stream's edges (mutation run: survivors of redact.py) ----------------------------------

def test_the_released_text_has_a_newline_per_line_move_up_to_the_cut() -> None:
    assert Redactor().feed_text(b"a\x1b[2Bb ") == (b"a\x1b[2Bb ", b"a\nb ")
    key = b"sk-" + b"a" * 22
    assert Redactor().feed_text(key + b"\x1b[2Bx y") == (b"[REDACTED]\x1b[2B y", b"[REDACTED]\n y")
    r = Redactor()
    assert r.feed_text(b"ok\x1b[2Bgo sk-ab") == (b"ok\x1b[2Bgo ", b"ok\ngo ")  # the held key's start, not the move


def test_flush_gives_the_raw_bytes_and_an_unended_string_at_the_end_is_released() -> None:
    r = Redactor()
    assert r.feed(b"x \x1b[31msk-proj-abc") == b"x \x1b[31m" and r.flush() == b"sk-proj-abc"
    r = Redactor()
    assert r.feed(b"x \x1b[1mghp_R4nD0m") == b"x \x1b[1m" and r.flush() == b"ghp_R4nD0m"
    assert Redactor().redact(b"x \x1b]0;title") == b"x \x1b]0;title"  # complete data: nothing is held back
    r = Redactor()
    assert r.feed(b"\x1b[1mghp_R4\x1b[0mnD0m") == b"\x1b[1m" and r.flush_text() == (b"ghp_R4\x1b[0mnD0m", b"ghp_R4nD0m")


def test_two_secrets_that_touch_are_one_marker() -> None:
    r = Redactor({"A_TOKEN": "abcdefgh", "B_TOKEN": "ijklmnop"})
    assert r.redact(b"x abcdefghijklmnop y") == b"x [REDACTED] y"
    assert r.redact(b"x abcdefgh ijklmnop y") == b"x [REDACTED] [REDACTED] y"


def test_text_that_is_not_utf8_is_redacted_and_kept() -> None:
    key = "sk-" + "a" * 22
    assert redact_text("\udcfe " + key + " \udcff") == "\udcfe [REDACTED] \udcff"
    assert secret_env_values({"A_TOKEN": "\udcfeabcdefgh"}) == (b"\xfeabcdefgh",)
    assert Redactor({"A_TOKEN": "\udcfeabcdefgh"}).redact(b"v \xfeabcdefgh") == b"v [REDACTED]"
