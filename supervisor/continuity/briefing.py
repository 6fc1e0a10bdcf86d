"""A briefing's sections and its token budget: cut long items first, then trim whole items.

:class:`Section` is a titled list of items, most important first, each with
the command (or file) that shows it whole.  :func:`fit` makes the rendered
text fit a budget in two steps, both deterministic:

1. every item longer than :func:`item_cap` tokens is cut, and the cut says
   how much went and the exact command that prints the item whole, so one
   oversized item never costs the rest of the briefing;
2. while still over, the last item of the least important section that has
   items is removed (in the order the caller gives); the trimmed section
   says how many went and the command that gets them back.

The section keyed ``constraints`` is never cut or trimmed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..tokens import estimate_tokens

#: Once the briefing is over budget, an item may keep this share of it (and at least ITEM_MIN_TOKENS).
ITEM_SHARE = 10
ITEM_MIN_TOKENS = 40
NEVER_CUT = "constraints"


@dataclass
class Section:
    """A titled list of items; items are ordered most important first.

    ``refs[i]`` is the command (or file) that shows item ``i`` whole, named
    when the item is cut; "" means the section's ``restore``.
    """

    key: str
    title: str
    items: list[str]
    restore: str = ""  # the command that gets trimmed items back
    empty_text: str = "(none)"
    trimmed: int = 0
    refs: list[str] = field(default_factory=list)
    cut: int = 0

    def add(self, item: str, ref: str = "") -> None:
        self.items.append(item)
        self.refs.append(ref)

    def ref(self, index: int) -> str:
        return (self.refs[index] if index < len(self.refs) else "") or self.restore

    def render(self) -> str:
        body = list(self.items)
        if self.trimmed:
            body.append(f"[trimmed {self.trimmed} item(s) to fit the budget; get them with: {self.restore}]")
        if not body:
            body = [self.empty_text]
        return f"## {self.title}\n" + "\n".join(body)


def render(header: str, sections: list[Section]) -> str:
    return header + "\n\n" + "\n\n".join(s.render() for s in sections) + "\n"


def fit(header: str, sections: list[Section], budget: int, trim_order: Sequence[str]) -> str:
    """The rendered briefing within ``budget`` if it can be (see the module docstring)."""
    if estimate_tokens(render(header, sections)) > budget:
        cap = item_cap(budget)
        for s in sections:
            if s.key != NEVER_CUT:
                _cut_long_items(s, cap)
    return _trim(header, sections, budget, trim_order)


def item_cap(budget: int) -> int:
    """The most tokens one item may keep once the briefing is over budget."""
    return max(ITEM_MIN_TOKENS, budget // ITEM_SHARE)


def cut_text(text: str, limit: int, ref: str) -> str:
    """``text`` cut to at most ``limit`` tokens, ending with how much went and where the whole is."""
    if estimate_tokens(text) <= limit:
        return text

    def marked(n: int) -> str:
        return f"{text[:n].rstrip()} … [cut {len(text) - n:,} chars to fit; whole: {ref}]"

    lo, hi = 0, len(text)
    while lo < hi:  # the longest prefix whose marked form fits
        mid = (lo + hi + 1) // 2
        if estimate_tokens(marked(mid)) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return marked(lo)


def _cut_long_items(section: Section, limit: int) -> None:
    for i, item in enumerate(section.items):
        if estimate_tokens(item) > limit:
            section.items[i] = cut_text(item, limit, section.ref(i))
            section.cut += 1


def _trim(header: str, sections: list[Section], budget: int, trim_order: Sequence[str]) -> str:
    """Remove items, least important section first, until the text fits (or nothing is left)."""
    by_key = {s.key: s for s in sections}
    order = [by_key[k] for k in trim_order if k in by_key and k != NEVER_CUT]
    text = render(header, sections)
    cost = estimate_tokens(text)
    for section in order:
        while cost > budget and section.items:
            section.items.pop()
            if len(section.refs) > len(section.items):
                section.refs.pop()
            section.trimmed += 1
            text = render(header, sections)
            cost = estimate_tokens(text)
    return text
