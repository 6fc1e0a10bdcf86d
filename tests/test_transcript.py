"""Tests for supervisor.session.transcript: redaction, raw and clean views, tail and follow."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from supervisor.tokens import estimate_tokens
from supervisor.session.cleantext import CleanTextFilter, LineFolder, project, text_runs
from supervisor.session.redact import MAX_HOLD, Redactor, redact_text
from supervisor.session.shapes import PEM_CAP
from supervisor.session.transcript import Transcript, follow_clean, read_clean_tail

SECRETS = {
    "openai": b"sk-abcdefghijklmnopqrstuvwxyz0123456789ABCD",
    "anthropic": b"sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_xyz",
    "project": b"sk-proj-ZYXWVUTSRQPONMLKJIHGFEDCBA9876543210",
    "github_classic": b"ghp_0123456789abcdefghijABCDEFGHIJ012345",
    "github_oauth": b"gho_0123456789abcdefghijABCDEFGHIJ012345",
    "github_pat": b"github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "aws": b"AKIAIOSFODNN7EXAMPLE",
}
ENV = {
    "MY_SERVICE_API_KEY": "plainvalue-0001-xyz",
    "DEPLOY_TOKEN": "tok:with.special*chars+",
    "DB_PASSWORD": "correct horse battery",
    "APP_SECRET": "s3cr3t-s3cr3t",
    "API_KEY": "k3y-value-4242",
    "SHORT_TOKEN": "abc",  # too short to be treated as a secret
    "HOME": "/home/someone-long-path",  # not a secret name
}
ENV_SECRETS = [v.encode() for k, v in ENV.items() if k not in ("SHORT_TOKEN", "HOME")]


def files(tmp_path: Path, name: str = "s1") -> tuple[bytes, bytes]:
    d = tmp_path / "t"
    return (d / f"{name}.log").read_bytes(), (d / f"{name}.txt").read_bytes()


def write_all(tmp_path: Path, chunks: list[bytes], env: dict[str, str] | None = None) -> Transcript:
    t = Transcript(tmp_path / "t", "s1", env or {})
    for c in chunks:
        t.write(c)
    t.close()
    return t


# ---------------------------------------------------------------- redaction


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_each_pattern_is_redacted(name: str) -> None:
    secret = SECRETS[name]
    out = Redactor().redact(b"before " + secret + b" after\r\n")
    assert out == b"before [REDACTED] after\r\n"


def test_bearer_keeps_the_word() -> None:
    r = Redactor()
    assert r.redact(b"Authorization: Bearer eyJhbGciOi.J9abc-def_ghi") == b"Authorization: Bearer [REDACTED]"
    assert r.redact(b"bearer abcdefgh12345") == b"bearer [REDACTED]"


def test_lookalikes_are_not_redacted() -> None:
    r = Redactor()
    for text in [b"task-management-system-design-doc", b"sk-short", b"the bearer of news", b"AKIA", b"disk-usage"]:
        assert r.redact(text) == text


def test_env_values_redacted_by_name() -> None:
    r = Redactor(ENV)
    for value in ENV_SECRETS:
        assert r.redact(b"x=" + value + b";") == b"x=[REDACTED];"
    assert r.redact(b"abc /home/someone-long-path") == b"abc /home/someone-long-path"


def test_redact_text_helper() -> None:
    assert redact_text("key sk-abcdefghijklmnopqrstuvwxyz end") == "key [REDACTED] end"
    assert redact_text("v=plainvalue-0001-xyz é", ENV) == "v=[REDACTED] é"
    assert redact_text("--token=ghp_0123456789abcdefghijABCDEFGHIJ012345") == "--token=[REDACTED]"


# The issue's shapes: (what is printed, what the redacted line must be).
SHAPED = {
    "aws_secret": (b"aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                   b"aws_secret_access_key = [REDACTED]"),
    "aws_json": (b'"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",', b'"SecretAccessKey": [REDACTED],'),
    "slack": (b"SLACK=xoxb-2417883721-5934823198421-Ws9Tq4Lm2Xv8Kd1Rb6Np3Zc", b"SLACK=[REDACTED]"),
    "jwt": (b"jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U ok",
            b"jwt [REDACTED] ok"),
    "pem": (b"-----BEGIN RSA PRIVATE KEY-----\r\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgwMbRvI0MBZhpF\r\n"
            b"Proc-Type: 4,ENCRYPTED\r\nq2bW==\r\n-----END RSA PRIVATE KEY-----\r\nnext", b"[REDACTED]\r\nnext"),
    "url": (b"DATABASE_URL=postgres://app:Pa55w0rd@db.internal:5432/app", b"DATABASE_URL=postgres://app:[REDACTED]@db.internal:5432/app"),
    "google": (b"key=AIzaSyD4x9Kq2Lm7Vb3Nc8Hd1Js6Fg0Ay5Tz2Wr&x", b"key=[REDACTED]&x"),
    "password=": (b"mysql --password=hunter2xyz -u root", b"mysql --password=[REDACTED] -u root"),
    "secret:": (b"client_secret: mZ0q9LrWk2vXy7Pd", b"client_secret: [REDACTED]"),
    "token=": (b"refresh_token=c0ffeeD00dF00dBeef42;", b"refresh_token=[REDACTED];"),
    "*_KEY": (b"export STRIPE_KEY='rk_live_abcdef123456'", b"export STRIPE_KEY=[REDACTED]"),
    "*_CREDENTIALS": (b"GCP_CREDENTIALS=gcpcredblob55aa66", b"GCP_CREDENTIALS=[REDACTED]"),
    "json": (b'{"password": "p@ss w0rd!"}', b'{"password": [REDACTED]}'),
    "gitlab": (b"glpat-AbCdEfGhIjKlMnOpQrSt12", b"[REDACTED]"),
    "aws_session_id": (b"ASIAZ7Q3RTXW5YV2NB4M", b"[REDACTED]"),
}


@pytest.mark.parametrize("name", sorted(SHAPED))
def test_the_issues_shapes_are_redacted(name: str) -> None:
    text, expected = SHAPED[name]
    assert Redactor().redact(text) == expected


@pytest.mark.parametrize("text", [
    b"token = get_token()", b"max_tokens=4096", b"tokens: 123,456", b"PWD=/home/dev/project",
    b"https://github.com:443/owner/repo", b"password: <your password>", b"secret: ${DB_SECRET}",
    b"-----BEGIN CERTIFICATE-----", b"primary_key=True", b"keyboard: us", b"the secret: it works",
    b"commit 1f0e3dad99908345f7439f8ffabdffc4", b"tokenizer = AutoTokenizer.from_pretrained(name)",
    b"secret_key = os.environ['SECRET_KEY']", b"password: ********", b"token_type: bearer",
])
def test_ordinary_output_is_left_alone(text: bytes) -> None:
    assert Redactor().redact(text + b"\n") == text + b"\n"


def test_a_key_split_in_time_is_held_until_its_token_ends_never_by_a_clock() -> None:
    r = Redactor()
    assert r.feed(b"key: sk-ant-api03-Xr8Kp2") == b"key: "
    held = r.pending
    assert held == len(b"sk-ant-api03-Xr8Kp2")
    # however long the pause, only more bytes release it: feeding nothing changes nothing
    assert r.feed(b"") == b"" and r.pending == held
    assert r.feed(b"Lm9Qw4Tz7Vb1Nc6Hd3Js5Fg0Ay") == b""
    assert r.feed(b" and on\r\n") == b"[REDACTED] and on\r\n"
    assert r.pending == 0


def test_a_prompt_is_released_once_its_last_token_cannot_start_a_secret() -> None:
    r = Redactor()
    assert r.feed(b"done\r\nfake> ") == b"done\r\nfake> "
    assert r.feed(b"Password: ") == b"Password: "  # the name is kept; only a value would be held
    assert r.feed(b"hunter2") == b""
    assert r.feed(b"x\r\n") == b"[REDACTED]\r\n"
    assert r.feed(b"ok s") == b"ok "  # "s" may begin "sk-": held until the next byte
    assert r.feed(b"o\r\n") == b"so\r\n"


def test_a_prompt_reaches_the_clean_view_at_once(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t", "s1", ENV)
    t.write(b"\x1b[32mworking\x1b[0m\r\nfake> ")
    assert t.pending == 0
    assert (tmp_path / "t" / "s1.txt").read_bytes() == b"working\nfake> "
    t.write(b"ghp_0123456789abc")  # the start of a token: written nowhere yet
    assert (tmp_path / "t" / "s1.txt").read_bytes() == b"working\nfake> "
    assert t.write(b"defghijABCDEFGHIJ012345 ") == b"[REDACTED] "
    t.close()
    assert (tmp_path / "t" / "s1.txt").read_bytes() == b"working\nfake> [REDACTED] "


def test_a_pem_block_is_held_to_its_end_line_and_cut_out_whole() -> None:
    text, expected = SHAPED["pem"]
    r = Redactor()
    out = b""
    for i in range(0, len(text), 7):
        out += r.feed(text[i:i + 7])
        if i > 40 and i + 7 < text.index(b"-----END"):
            assert b"MIIE" not in out and out == b""
    assert out + r.flush() == expected


def test_a_secret_longer_than_the_cap_is_cut_out_to_its_end() -> None:
    r = Redactor()
    key = b"sk-" + b"A1b2C3" * 200  # 1203 characters, more than MAX_HOLD
    out = b"".join(r.feed(key[i:i + 100]) for i in range(0, len(key), 100)) + r.feed(b" tail\n") + r.flush()
    assert out == b"[REDACTED] tail\n"
    assert r.pending == 0
    body = b"x" * (PEM_CAP + 500)
    block = b"-----BEGIN PRIVATE KEY-----\n" + body + b"\n-----END PRIVATE KEY-----\nafter\n"
    r = Redactor()
    out = b"".join(r.feed(block[i:i + 4096]) for i in range(0, len(block), 4096)) + r.flush()
    assert out == b"[REDACTED]\nafter\n"


def test_a_key_split_by_cursor_moves_is_one_key() -> None:
    key = b"AIzaSyD4x9Kq2Lm7Vb3Nc8Hd1Js6Fg0Ay5Tz2Wr"
    for move in (b"\x1b[1A\x1b[1B", b"\x1b[1C\x1b[1D", b"\x1b[12;40H", b"\x1b7\x1b8", b"\x08\x08"):
        out = Redactor().redact(key[:12] + move + key[12:] + b"\r\n")
        assert out == b"[REDACTED]" + move.replace(b"\x08", b"") + b"\r\n" or (
            move == b"\x08\x08" and out == b"[REDACTED]\x08\x08\r\n"), (move, out)


ALL_SECRETS = list(SECRETS.values()) + ENV_SECRETS + [b"Bearer abcdefghijklmnop123"]


@pytest.mark.parametrize("secret", ALL_SECRETS, ids=lambda s: s[:12].decode())
def test_secret_split_at_every_offset_never_reaches_files(tmp_path: Path, secret: bytes) -> None:
    """A secret cut into two write() calls at any offset is still redacted in both files."""
    stream = b"\x1b[32mrunning\x1b[0m tool: export X=" + secret + b" ; done\r\nfake> "
    start = stream.index(secret)
    hidden = secret.removeprefix(b"Bearer ")
    for cut in range(start, start + len(secret) + 1):
        d = tmp_path / f"cut{cut}"
        t = Transcript(d, "s", ENV)
        t.write(stream[:cut])
        t.write(stream[cut:])
        t.close()
        log, txt = (d / "s.log").read_bytes(), (d / "s.txt").read_bytes()
        for content in (log, txt):
            assert b"[REDACTED]" in content
            # No piece of the secret long enough to be meaningful survives.
            for i in range(0, len(hidden) - 6):
                assert hidden[i:i + 7] not in content, (cut, content)
        assert log == stream.replace(hidden, b"[REDACTED]")


def test_secret_with_escape_codes_inside_is_redacted_in_both_views(tmp_path: Path) -> None:
    key = SECRETS["project"]
    highlighted = b"\x1b[36msk\x1b[0m-\x1b[33m" + key[3:] + b"\x1b[0m\r\n"
    write_all(tmp_path, [highlighted[:9], highlighted[9:]])
    log, txt = files(tmp_path)
    assert txt == b"[REDACTED]\n"
    # the raw view keeps the escape sequences (the terminal state), not a byte of the key
    assert log == b"\x1b[36m[REDACTED]\x1b[0m\x1b[33m\x1b[0m\r\n"


def test_three_way_split_and_hold_is_bounded() -> None:
    r = Redactor()
    secret = SECRETS["anthropic"]
    out = r.feed(b"a " + secret[:2]) + r.feed(secret[2:9]) + r.feed(secret[9:] + b" b") + r.flush()
    assert out == b"a [REDACTED] b"
    # A long run of key characters is never held beyond MAX_HOLD.
    r.feed(b"sk-" + b"x" * 5000)
    assert r.pending <= MAX_HOLD


def test_tail_held_only_when_it_could_start_a_secret() -> None:
    r = Redactor(ENV)
    assert r.feed(b"plain output line\r\n") == b"plain output line\r\n"
    assert r.pending == 0
    assert r.feed(b"hello s") == b"hello "  # "s" may start "sk-"
    assert r.feed(b"ome more") == b"some more"  # released on the next write
    assert r.feed(b"value plainval") == b"value "  # prefix of an env secret
    assert r.flush() == b"plainval"


# ---------------------------------------------------------------- raw equality


chunk_lists = st.lists(st.binary(max_size=300), max_size=12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chunks=chunk_lists)
def test_raw_log_is_exact_concatenation_without_secrets(tmp_path_factory: pytest.TempPathFactory,
                                                        chunks: list[bytes]) -> None:
    data = b"".join(chunks)
    if Redactor(ENV).redact(data) != data:  # random bytes practically never hold a secret
        return
    tmp = tmp_path_factory.mktemp("prop")
    t = Transcript(tmp, "p", ENV)
    for c in chunks:
        t.write(c)
    t.flush()
    assert (tmp / "p.log").read_bytes() == data
    assert t.raw_bytes == len(data)
    t.close()


STREAM = b"".join([
    b"\x1b]0;agent: sk-title\x07plain s\r\n", SECRETS["anthropic"], b" \x1b[31mghp_0123456789ab\x1b[0mcdefghijABCDEFGHIJ012345\r\n",
    SHAPED["pem"][0], b"\r\n", SHAPED["url"][0], b" https://example.com:8080/x\r\n", SHAPED["jwt"][0], b"\r\n",
    b"Authorization: Bearer abcdefgh12345\r\n", SHAPED["json"][0], b" ", SHAPED["password="][0], b"\r\n",
    b"v=", ENV_SECRETS[2], b" AKIAIOSFODNN7EXAMPLEX AKIAIOSFODNN7EXAMPLE\r\n", SHAPED["aws_secret"][0], b"\r\nfake> ",
])


@settings(max_examples=400, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_chunking_never_changes_the_redaction(cuts: list[int]) -> None:
    """feed() over any split of the stream, then flush(), equals redact() of the whole."""
    expected = Redactor(ENV).redact(STREAM)
    r = Redactor(ENV)
    out, prev = [], 0
    for cut in sorted(cuts) + [len(STREAM)]:
        out.append(r.feed(STREAM[prev:cut]))
        prev = cut
    out.append(r.flush())
    assert b"".join(out) == expected
    assert expected.count(b"[REDACTED]") == 11


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(min_value=0, max_value=len(STREAM) + 60), max_size=10))
def test_the_clean_view_is_the_clean_text_of_the_raw_view(tmp_path_factory: pytest.TempPathFactory,
                                                          cuts: list[int]) -> None:
    """The .txt is what CleanTextFilter makes of the .log, for any chunking (one parse serves both)."""
    stream = STREAM + b"\x1b[5;1Hsk-proj-abc\x1b[5;12Hdefghijklmnopqrstuvw\x1b[2A\xc3\xa9\r"
    tmp = tmp_path_factory.mktemp("views")
    t = Transcript(tmp, "v", ENV)
    prev = 0
    for cut in sorted(c % (len(stream) + 1) for c in cuts) + [len(stream)]:
        t.write(stream[prev:cut])
        prev = cut
    t.close()
    log, txt = (tmp / "v.log").read_bytes(), (tmp / "v.txt").read_bytes()
    clean = CleanTextFilter()
    assert txt.decode() == clean.feed(log) + clean.finish()
    assert b"[REDACTED]\n" in txt and b"defghij" not in log


INSERTS = [b"\x1b[31m", b"\x1b[0m", b"\x1b[1;2H", b"\x1b[3C", b"\x1b[2A", b"\x1b]0;title\x07", b"\x1b7", b"\x08"]
PLANTED = [SECRETS["anthropic"], SECRETS["github_pat"], SECRETS["aws"], SHAPED["slack"][0][6:], SHAPED["google"][0][4:-2],
           SHAPED["jwt"][0][4:-3], b"Bearer abcdefghijklmnop123", ENV_SECRETS[0]]


@settings(max_examples=300, deadline=None)
@given(which=st.sampled_from(range(len(PLANTED))), inserts=st.lists(st.tuples(st.integers(1, 60), st.sampled_from(INSERTS)),
       max_size=3), cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=6))
def test_escapes_anywhere_inside_a_secret_never_let_it_through(which: int, inserts: list[tuple[int, bytes]],
                                                                cuts: list[int]) -> None:
    secret = PLANTED[which]
    raw = secret
    for at, seq in sorted(((min(at, len(secret) - 1), seq) for at, seq in inserts), reverse=True):
        raw = raw[:at] + seq + raw[at:]  # positions in the secret itself: never inside another insert
    stream = b"out: " + raw + b" done\r\n"
    r = Redactor(ENV)
    out, prev = [], 0
    for cut in sorted(c % (len(stream) + 1) for c in cuts) + [len(stream)]:
        out.append(r.feed(stream[prev:cut]))
        prev = cut
    got = b"".join(out) + r.flush()
    text = project(got)
    hidden = secret.removeprefix(b"Bearer ")
    assert b"[REDACTED]" in got
    for i in range(len(hidden) - 7):
        assert hidden[i:i + 8] not in text and hidden[i:i + 8] not in got


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300) | st.lists(st.sampled_from(
    [b"\x1b[", b"\x1b]0;t", b"\x07", b"\x1b\\", b"31m", b"2;3H", b"ab", b"\r\n", b"\x1bP", b"\x08", b"\x1b"]),
    max_size=40).map(b"".join))
def test_text_runs_map_the_matching_text_to_raw_bytes(data: bytes) -> None:
    text = project(data)
    runs = text_runs(data)
    assert b"".join(data[raw:raw + n] for _, raw, n in runs) == text
    assert [t for t, _, _ in runs] == [sum(n for _, _, n in runs[:i]) for i in range(len(runs))]


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200), cuts=st.lists(st.integers(min_value=0, max_value=800), max_size=6))
def test_clean_text_is_independent_of_chunking(text: str, cuts: list[int]) -> None:
    """Whatever the chunking, the clean view is the same (escape/UTF-8 carry-over)."""
    data = ("\x1b]0;title\x07\x1b[1;31m" + text + "\x1b[0m\r\n\x1bP1$r0m\x1b\\é€\r").encode("utf-8")
    whole = CleanTextFilter()
    expected = whole.feed(data) + whole.finish()
    f = CleanTextFilter()
    out, prev = [], 0
    for cut in sorted(c % (len(data) + 1) for c in cuts) + [len(data)]:
        out.append(f.feed(data[prev:cut]))
        prev = cut
    out.append(f.finish())
    assert "".join(out) == expected


# ---------------------------------------------------------------- clean text


def clean_by_byte(data: bytes) -> str:
    f = CleanTextFilter()
    return "".join(f.feed(data[i:i + 1]) for i in range(len(data))) + f.finish()


def clean_whole(data: bytes) -> str:
    f = CleanTextFilter()
    return f.feed(data) + f.finish()


@pytest.mark.parametrize("clean", [clean_whole, clean_by_byte], ids=["whole", "bytewise"])
def test_clean_view_strips_sequences(clean) -> None:  # type: ignore[no-untyped-def]
    data = (
        b"\x1b]0;agent: working\x07"  # OSC title, BEL
        b"\x1b]8;;https://example.com/x\x1b\\link\x1b]8;;\x1b\\"  # OSC 8 hyperlink, ST
        b"\x1b[1m\x1b[38;5;208mbold orange\x1b[0m plain\r\n"
        b"\x1b(B\x1b)0\x1b=\x1b>\x1b7saved\x1b8"  # charset designations, keypad, save/restore
        b"\x1bP1$r0m\x1b\\"  # DCS
        b"\x1b[?25l\x1b[2K\x1b[1Gspinner\x1b[?25h\r\n"
        b"bell\x07 back\x08space\x00nul\r\n"
    )
    assert clean(data) == "linkbold orange plain\nsavedspinner\nbell backspacenul\n"


@pytest.mark.parametrize("clean", [clean_whole, clean_by_byte], ids=["whole", "bytewise"])
def test_carriage_returns_and_cursor_moves(clean) -> None:  # type: ignore[no-untyped-def]
    assert clean(b"a\r\nb\r\r\nc\rd\r") == "a\nb\nc\nd\n"
    assert clean(b"10%\r50%\r100%\r\n") == "10%\n50%\n100%\n"
    assert clean(b"top\x1b[5;1Hbottom\x1b[2Aup") == "top\nbottom\nup"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=12).map(lambda b: bytes(b"ab\r\n"[x % 4] for x in b)), max_size=12))
def test_fold_is_the_rule_for_any_chunking(chunks: list[bytes]) -> None:
    """Every run of carriage returns, with the newline right after it if any, is one newline, however the stream
    is cut (the fast path that deletes the \r of each \r\n, and the general one, agree)."""
    import re

    whole = b"".join(chunks)
    folder = LineFolder()
    got = "".join(folder.feed(c) for c in chunks) + folder.finish()
    assert got == re.sub(r"\r+\n?", "\n", whole.decode())


def test_osc_title_split_across_chunks(tmp_path: Path) -> None:
    t = write_all(tmp_path, [b"before\x1b]0;my ", b"title is long", b"\x1b", b"\\after\x1b[3", b"1mred\x1b[", b"0m"])
    log, txt = files(tmp_path)
    assert txt == b"beforeafterred"
    assert log == b"before\x1b]0;my title is long\x1b\\after\x1b[31mred\x1b[0m"
    assert t.clean_chars == len("beforeafterred")


def test_incremental_utf8_across_chunks(tmp_path: Path) -> None:
    text = "héllo wörld — 日本語 🙂\n"
    data = text.encode()
    t = Transcript(tmp_path / "t", "s1", {})
    for i in range(len(data)):
        t.write(data[i:i + 1])
    t.write(b"bad \xff byte\n")
    t.close()
    log, txt = files(tmp_path)
    assert log == data + b"bad \xff byte\n"
    assert txt.decode() == text + "bad \ufffd byte\n"
    full = text + "bad \ufffd byte\n"
    assert t.clean_chars == len(full)
    assert t.estimated_tokens == estimate_tokens(full)


# ---------------------------------------------------------------- files and helpers


def test_files_permissions_append_and_close_idempotent(tmp_path: Path) -> None:
    d = tmp_path / "state" / "transcripts" / "unit"
    t = Transcript(d, "20250101-abc", {})
    t.write(b"one\r\n")
    # Visible to a reader before flush/close: no Python-level buffering.
    assert (d / "20250101-abc.log").read_bytes() == b"one\r\n"
    assert (d / "20250101-abc.txt").read_bytes() == b"one\n"
    t.close()
    t.close()
    assert t.closed
    with pytest.raises(ValueError):
        t.write(b"x")
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(d / "20250101-abc.log").st_mode) == 0o600
    t2 = Transcript(d, "20250101-abc", {})  # reopening appends
    t2.write(b"two\n")
    t2.close()
    assert (d / "20250101-abc.log").read_bytes() == b"one\r\ntwo\n"


@pytest.mark.parametrize("bad", ["", "../x", "a/b", ".hidden"])
def test_bad_session_id_rejected(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError):
        Transcript(tmp_path, bad, {})


def test_tail_and_read_clean_tail(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t", "s1", {})
    for i in range(5000):
        t.write(f"\x1b[32mline {i}\x1b[0m\r\n".encode())
    t.write(b"fake> ")
    t.flush()
    assert t.tail(20).endswith("line 4999\nfake> ")
    assert read_clean_tail(t.text_path, 3) == ["line 4998", "line 4999", "fake> "]
    assert read_clean_tail(t.log_path, 1) == ["fake> "]  # .log maps to the clean view
    assert len(read_clean_tail(t.text_path, 4000)) == 4000
    assert read_clean_tail(t.text_path, 0) == []
    t.write("€".encode())
    t.flush()
    assert t.tail(2) == ""  # a cut multi-byte char is dropped, never mis-decoded
    assert t.tail(3) == "€"
    t.close()


def test_follow_yields_tail_then_growth(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t", "s1", {})
    t.write(b"a\r\nb\r\nc\r\n")
    stop = threading.Event()
    gen = follow_clean(t.text_path, lines=2, should_stop=stop.is_set, poll_interval=0.01)
    assert next(gen) == "b\nc\n"
    t.write("d é".encode()[:-1])  # half of "é"
    t.write("é".encode()[1:] + b"\r\nfake> ")
    t.flush()
    got = ""
    while got != "d é\nfake> ":
        got += next(gen)  # blocks polling until the file grows
    stop.set()
    assert list(gen) == []
    t.close()


def test_follow_stops_while_waiting_for_file(tmp_path: Path) -> None:
    calls = []

    def should_stop() -> bool:
        calls.append(1)
        return len(calls) > 2

    assert list(follow_clean(tmp_path / "missing.txt", should_stop=should_stop, poll_interval=0.001)) == []
