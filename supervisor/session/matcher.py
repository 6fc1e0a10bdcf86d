"""One pass for every secret shape: all their keywords in one automaton, each regex only where its keyword is.

This is how gitleaks runs its rules, and what a stream needs: the text is
lowercased and searched once by an Aho–Corasick automaton
(``ahocorasick_rs``, a DFA) holding every keyword of

* agentd's own shapes (:data:`~.shapes.SHAPES`: their literals, ``sk-``,
  ``-----BEGIN``, ``password`` ...),
* the kept gitleaks rules (:func:`~.gitleaks.load`: ``sk_live``, ``npm_``,
  ``hf_`` ...),
* the exact values of the unit's secret environment variables,

and only where a keyword occurs does the owner's pattern run: a shape's
``full`` pattern is matched at its literal; a gitleaks rule's regex is
matched at its keyword (or searched in a bounded window before it, for the
rules of :data:`~.gitleaks.INNER`); an environment value is compared
exactly.  So ordinary output costs one ``bytes.lower`` and one automaton
pass per batch, however many shapes there are.

:meth:`Matcher.scan` also says how much of a stream's end must be held back
because it may be the start of a secret (see :mod:`.redact` for the stream):

* a shape's own *partial* pattern, as before (``sk-ant-api03-Xr8`` at the
  end, a PEM block without its END line, ``password: "hun``);
* an unfinished literal of a shape (``s``, ``sk`` of ``sk-``);
* for the gitleaks rules, the *open token*, the run of bytes at the end
  since the last blank, quote or semicolon (no kept rule's secret contains
  one), when one of their keywords is in it (``sk_live_abc``), a
  "name = value" rule's name stands just before it (``cohere_key=ab``), or it
  ends with the unfinished start of a keyword (``sk_li``, at a word's start);
* an environment value's beginning at the end.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import ahocorasick_rs

from .gitleaks import Rule, load
from .shapes import SHAPES, TOKEN_CAP, Shape
from .unwrap import View, local_view, needs_view, wraps_after

#: A kept part (a name, its quotes and separator) is at most this long: hits that far before the new text count.
SCAN_BACK = 128
#: At most this many bytes between the end of a "name = value" rule's name and its value (gitleaks' form: 20 + 3 + 4 + 5).
SEMI_GAP = 40
#: How far past its keyword a gitleaks rule's match may end (the longest, a PyPI token, is about 1,000).
TOKEN_WINDOW = 1100
#: The same for the rules searched around their keyword (:data:`~.gitleaks.INNER`; the longest, OpenAI's, is 160).
INNER_WINDOW = 256
#: What follows a secret cut out at its hold limit (``max_hold``): the rest of its token.
_TOKEN_REST = re.compile(rb"[^\s'\"`;]*")
#: Bytes that end every kept gitleaks rule's secret (blanks, quotes, backquote, semicolon).
TERMINATORS = b" \t\n\r\x0b\x0c'\"`;"
_TO_NUL = bytes.maketrans(TERMINATORS, b"\x00" * len(TERMINATORS))  # the matching text never holds a NUL
_WORD = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_SHAPE, _RULE, _ENV = 0, 1, 2

Span = tuple[int, int, bool]  # start, end, gets a marker


class Matcher:
    """The secrets of a text and the hold point of a stream, in one automaton pass.

    ``env_values`` are exact secret values; ``max_hold`` caps a held token
    (shapes with a cap of their own, PEM blocks, keep theirs).
    """

    def __init__(self, env_values: Iterable[bytes] = (), *, max_hold: int = TOKEN_CAP,
                 rules: tuple[Rule, ...] | None = None) -> None:
        self.max_hold = max_hold
        self.rules = load() if rules is None else rules
        targets: dict[bytes, list[tuple]] = {}
        for shape in SHAPES:
            cap = max_hold if shape.cap == TOKEN_CAP else shape.cap
            group = "v" if "v" in shape.full.groupindex else 0
            for literal in shape.literals:
                targets.setdefault(literal.lower(), []).append((_SHAPE, shape, cap, group))
        for rule in self.rules:
            for keyword in rule.keywords:
                targets.setdefault(keyword, []).append((_RULE, rule))
        self.env_values = tuple(sorted(set(env_values), key=len, reverse=True))
        for value in self.env_values:
            targets.setdefault(value.lower(), []).append((_ENV, value))
        patterns = list(targets)
        self._targets = [targets[p] for p in patterns]
        self._automaton = ahocorasick_rs.BytesAhoCorasick(patterns, implementation=ahocorasick_rs.Implementation.DFA)
        # Unfinished literals of the shapes (``s``, ``sk`` of ``sk-``): prefix -> bytes that may not precede it.
        prefixes: dict[bytes, bytes] = {}
        for shape in SHAPES:
            for lit in shape.hold:
                for i in range(1, len(lit)):
                    prefixes.setdefault(lit[:i], shape.after)
        self._prefixes = prefixes
        self._prefix_max = max((len(p) for p in prefixes), default=0)
        self._prefix_last = frozenset(p[-1] for p in prefixes)
        # Unfinished keywords of the gitleaks rules whose keyword is part of the secret: prefix -> at a word's start only.
        rule_prefixes: dict[bytes, bool] = {}
        for rule in self.rules:
            if rule.semi:
                continue  # the name is kept; the value is recognised later from the context
            for kw in rule.keywords:
                for i in range(1 if rule.starts_token else 2, len(kw)):
                    rule_prefixes[kw[:i]] = rule_prefixes.get(kw[:i], True) and rule.starts_token
        self._rule_prefixes = rule_prefixes
        self._rule_prefix_max = max((len(p) for p in rule_prefixes), default=0)
        self._rule_prefix_last = frozenset(p[-1] for p in rule_prefixes)

    # -- the pass ------------------------------------------------------------------
    def scan(self, q: bytes, b: int, final: bool, rest: re.Pattern[bytes] | None = None,
             cols: int | None = None) -> tuple[list[Span], int, re.Pattern[bytes] | None]:
        """Secret spans of ``q`` past ``b`` (start, end, gets a marker), the hold point, what goes on.

        ``q[:b]`` is text already released (context); ``rest`` a secret cut at
        its cap that goes on at ``b``.  With ``final`` nothing is held.
        ``cols`` is the terminal's width, if known (a full line was wrapped:
        see :mod:`.unwrap`).
        """
        n = len(q)
        start = max(0, b - SCAN_BACK)
        spans: list[Span] = []
        wholes: list[tuple[int, int]] = []  # secrets found in pieces (wrapped, boxed): first start, last end
        holds: list[int] = []
        going: re.Pattern[bytes] | None = None
        if rest is not None:
            end = rest.match(q, b).end()  # type: ignore[union-attr]
            if end > b:
                spans.append((b, end, False))
            if end == n and not final:
                going = rest
        low = q.lower()
        near: list[tuple[int, Rule]] = []  # gitleaks keyword hits close to the end: (end of the keyword, rule)
        near_from = n - self.max_hold - SEMI_GAP
        for index, pos, stop in self._automaton.find_matches_as_indexes(low, overlapping=True):
            if pos < start:
                continue
            for target in self._targets[index]:
                kind = target[0]
                if kind == _RULE:
                    rule = target[1]
                    reach = _rule_spans(rule, q, pos, stop, b, spans, wholes, cols)
                    if reach is not None and not final:  # a secret that reaches the end may go on
                        if n - reach > self.max_hold:
                            going = _TOKEN_REST  # held no longer: cut out now, and the rest of its token
                        else:
                            holds.append(max(b, reach))
                    if stop >= near_from and (not rule.cased or q[pos:stop] in rule.cased) and not (
                            rule.boundary and pos and q[pos - 1] in _WORD):
                        near.append((stop, rule))  # (a keyword where its regex cannot begin holds nothing)
                elif kind == _SHAPE:
                    g = self._shape(target, q, low, pos, b, n, final, spans, holds, wholes, cols)
                    if g is not None:
                        going = g
                elif q.startswith(target[1], pos):
                    if stop > b:
                        spans.append((max(pos, b), stop, pos >= b))
        if final or going is not None:
            return spans, n, going
        for value in self.env_values:
            holds.append(_prefix_suffix_start(q, value, max(b, n - len(value) + 1)))
        holds.append(self._prefix_hold(q, b))
        t = self._open_token(q, b)
        if t < n and self._token_held(low, t, n, near):
            holds.append(t)
        cut = max(b, min(holds))
        moved = cut < n
        whole = [(s, e) for s, e, _ in spans] + wholes
        while moved:  # a complete secret straddling the cut is held whole (all its pieces)
            moved = False
            for s, e in whole:
                if s < cut < e:
                    cut, moved = max(b, s), True
        return spans, cut, None

    @staticmethod
    def _shape(target: tuple, q: bytes, low: bytes, pos: int, b: int, n: int, final: bool, spans: list[Span],
               holds: list[int], wholes: list[tuple[int, int]], cols: int | None) -> re.Pattern[bytes] | None:
        """One shape at its literal: the secret if complete, the hold if it may still grow."""
        _, shape, cap, group = target
        limit = min(n, pos + cap + SCAN_BACK)
        if (needs_view(q, pos, limit, cols) if shape.cap != TOKEN_CAP else wraps_after(q, pos, cols)
                or shape.partial.groupindex and _value_wraps(shape, q, low, pos, cols)):  # also as a TUI drew it
            lo = max(0, pos - 1)  # the byte before: the shapes' look-behinds
            view = local_view(q, lo, limit, cols)
            if view is not None:
                _shape_in_view(shape, cap, group, view, view.offset(pos), b, n, final, spans, holds, wholes)
        hay = low if shape.lower else q
        m = shape.full.match(hay, pos)
        if m is not None:
            vs, ve = m.span(group)
            if ve > b and (shape.accept is None or shape.accept(q[vs:ve])):
                spans.append((max(vs, b), ve, vs >= b))
        if not final and n - pos <= cap + SCAN_BACK:
            p = shape.partial.match(hay, pos)
            if p is not None:
                vs = p.start(group)
                if n - vs <= cap:
                    holds.append(vs)
                elif m is not None and m.end() == n and shape.rest is not None:
                    return shape.rest  # cut out at its cap; what follows of it goes too
        return None

    def _prefix_hold(self, q: bytes, b: int) -> int:
        """Start of an unfinished shape literal (``sk``, ``-----BEG``) at the end of ``q``, else ``len(q)``."""
        n = len(q)
        if not q or q[-1] not in self._prefix_last:
            return n
        for k in range(min(self._prefix_max, n - b), 0, -1):
            after = self._prefixes.get(q[n - k:])
            if after is not None and (k == n or q[n - k - 1] not in after):
                return n - k
        return n

    def _open_token(self, q: bytes, b: int) -> int:
        """Start of the open token: the bytes at the end since the last terminator (at most ``max_hold``, none before ``b``)."""
        lo = max(b, len(q) - self.max_hold)
        last = q[lo:].translate(_TO_NUL).rfind(b"\x00")
        return lo + last + 1

    def _token_held(self, low: bytes, t: int, n: int, near: list[tuple[int, Rule]]) -> bool:
        """Whether the open token ``low[t:n]`` may be (the start of) a gitleaks rule's secret."""
        for stop, rule in near:
            if stop > t or (rule.semi and stop + SEMI_GAP >= t):
                return True
        if low[-1] not in self._rule_prefix_last:
            return False
        for k in range(min(self._rule_prefix_max, n - t), 0, -1):
            word_start = self._rule_prefixes.get(low[n - k:])
            if word_start is not None and (not word_start or n - k == t or low[n - k - 1] not in _WORD):
                return True
        return False


def _value_wraps(shape: Shape, q: bytes, low: bytes, pos: int, cols: int | None) -> bool:
    """A name = value shape (``password: …``): whether its value, found in the text, runs into decoration."""
    m = shape.full.match(low if shape.lower else q, pos)
    return m is not None and wraps_after(q, m.start("v"), cols)


def _shape_in_view(shape: Shape, cap: int, group: int | str, view: View, at: int, b: int, n: int,
                   final: bool, spans: list[Span], holds: list[int], wholes: list[tuple[int, int]]) -> None:
    """:meth:`Matcher._shape` on a wrapped or boxed secret: matched in the view, cut out of the text in pieces."""
    hay = view.text.lower() if shape.lower else view.text
    m = shape.full.match(hay, at)
    if m is not None:
        vs, ve = m.span(group)
        if shape.accept is None or shape.accept(view.text[vs:ve]):
            _add_view_spans(view, vs, ve, b, spans, wholes)
    if not final and view.to_end:
        p = shape.partial.match(hay, at)
        if p is not None and len(hay) - p.start(group) <= cap:
            holds.append(view.at(p.start(group)))
        elif m is not None and view.open_end and m.end() == len(hay):
            holds.append(view.at(m.start(group)))
    return None


def _add_view_spans(view: View, vs: int, ve: int, b: int, spans: list[Span], wholes: list[tuple[int, int]]) -> None:
    """The text pieces of view span ``[vs, ve)`` that end past ``b``; the first piece gets the marker.

    A secret in several pieces is also noted whole in ``wholes``: a stream holds all of it or none.
    """
    pieces = view.spans(vs, ve)
    first = True
    for s, e in pieces:
        if e > b:
            spans.append((max(s, b), e, first and s >= b))
        first = False
    if len(pieces) > 1 and pieces[-1][1] > b:
        wholes.append((max(pieces[0][0], b), pieces[-1][1]))


def _rule_spans(rule: Rule, q: bytes, pos: int, stop: int, b: int, spans: list[Span], wholes: list[tuple[int, int]],
                cols: int | None) -> int | None:
    """A gitleaks rule where its keyword ``q[pos:stop]`` is: its secrets that end past ``b``.

    The rule runs on the text and, where a TUI wrapped or boxed it, on the
    view without that decoration (:mod:`.unwrap`).  Returns where a secret
    that reaches the end of ``q`` begins (it may go on), else None.
    """
    n = len(q)
    if rule.boundary and pos and q[pos - 1] in _WORD:
        return None  # its regex begins with \b: no match can begin here
    if rule.cased and q[pos:stop] not in rule.cased:
        return None  # its regex takes the keyword in one spelling only
    hi = min(n, stop + (INNER_WINDOW if rule.back is not None else TOKEN_WINDOW))
    found: list[tuple[int, int]] = []
    reach = _rule_found(rule, q, None, pos, stop - pos, hi, hi == n, b, spans, wholes, found)
    at = found[0][1] if rule.semi and found else pos  # a name = value rule: where its value ends
    if not wraps_after(q, at, cols):
        return reach
    view = local_view(q, max(0, pos - (rule.back or 0) - 1), hi, cols)
    if view is None:
        return reach
    at = view.offset(pos)
    wrapped = _rule_found(rule, view.text, view, at, stop - pos, len(view.text), view.to_end, b, spans, wholes)
    if wrapped is None and view.open_end and view.text.translate(_TO_NUL).find(b"\x00", at) == -1:
        wrapped = max(0, pos - (rule.back or 0))  # its token runs into a row's end: the next row may go on with it
    return wrapped if reach is None else reach if wrapped is None else min(reach, wrapped)


def _rule_found(rule: Rule, text: bytes, view: View | None, at: int, width: int, end: int, to_end: bool, b: int,
                spans: list[Span], wholes: list[tuple[int, int]], found_out: list[tuple[int, int]] | None = None
                ) -> int | None:
    """The rule's secrets in ``text`` (``q``, or ``view``'s text) where its keyword ``text[at:at + width]`` is.

    ``end`` bounds the search (``to_end``: it is the end of the text).  Returns
    where a secret that reaches the end of the text begins (in ``q``), else None.
    """
    if rule.back is None:
        m = rule.regex.match(text, at, end)
        found: tuple[re.Match[bytes], ...] = () if m is None else (m,)
    else:
        found = tuple(m for m in rule.regex.finditer(text, max(0, at - rule.back), end)
                      if m.start() <= at and m.end() >= at + width)
    reach: int | None = None
    for m in found:
        s, e = rule.secret_span(m)
        if e <= s or rule.allowed(text, m, (s, e)):
            continue
        if m.end() == end and not to_end:  # the window ended inside it: a longer token, cut out to its end
            e = _TOKEN_REST.match(text, e).end()
        if found_out is not None:
            found_out.append((s, e))
        if view is None:
            if e > b:
                spans.append((max(s, b), e, s >= b))
            at_end = e == len(text)
            start = s
        else:
            _add_view_spans(view, s, e, b, spans, wholes)
            at_end = view.to_end and e >= len(text) - 1
            start = view.at(s)
        if at_end:
            reach = start if reach is None else min(reach, start)
    return reach


def _prefix_suffix_start(buf: bytes, value: bytes, lo: int) -> int:
    """Start of the longest suffix of ``buf[lo:]`` that is a proper prefix of ``value`` (``len(buf)`` if none)."""
    n = len(buf)
    first = value[:1]
    pos = buf.find(first, lo) if lo < n else -1
    while pos != -1:
        if value.startswith(buf[pos:]):
            return pos
        pos = buf.find(first, pos + 1)
    return n


__all__ = ["SCAN_BACK", "SEMI_GAP", "TERMINATORS", "Matcher", "Span"]
