"""A briefing's sections and its budget (:mod:`supervisor.continuity.briefing`), pure: no store, no files.

The wakeup's own tests build briefings from real stores; these pin each rule
of the fitting at its edge: when a briefing counts as over budget, how long
an item may stay, which section loses items first and when it stops, what
a cut and a trim say, and that the constraints are never cut or trimmed.
"""

from __future__ import annotations

from supervisor.continuity.briefing import Section, cut_text, fit, item_cap, render

NEVER_CUT = "constraints"  # the key the wakeup gives its constraints section (a literal: it is the contract)
from supervisor.tokens import estimate_tokens


def section(key: str, items: list[str], restore: str = "", refs: list[str] | None = None) -> Section:
    s = Section(key, key.title(), [], restore=restore)
    for i, item in enumerate(items):
        s.add(item, (refs or [])[i] if refs and i < len(refs) else "")
    return s


def test_a_section_renders_its_title_and_items_or_its_empty_text() -> None:
    s = section("facts", ["- one", "- two"])
    assert s.render() == "## Facts\n- one\n- two"
    assert Section("facts", "Facts", []).render() == "## Facts\n(none)"
    assert Section("snap", "Snap", [], empty_text="(no snapshot recorded)").render() == "## Snap\n(no snapshot recorded)"
    assert (s.trimmed, s.cut, s.restore) == (0, 0, "")
    trimmed = section("facts", [], restore="agentd recall --kind fact")
    trimmed.trimmed = 3
    assert trimmed.render() == "## Facts\n[trimmed 3 item(s) to fit the budget; get them with: agentd recall --kind fact]"


def test_an_items_ref_is_its_own_command_else_the_sections_restore() -> None:
    s = section("decisions", ["a", "b"], restore="agentd recall --kind decision", refs=["agentd recall a"])
    assert s.items == ["a", "b"] and s.refs == ["agentd recall a", ""]
    assert s.ref(0) == "agentd recall a"
    assert s.ref(1) == "agentd recall --kind decision"  # "" means the restore
    assert s.ref(2) == s.ref(5) == "agentd recall --kind decision"  # no ref recorded at all
    s.add("c")
    assert s.refs[-1] == "" and s.ref(2) == "agentd recall --kind decision"
    assert Section("k", "K", ["x"]).ref(0) == ""  # neither a ref nor a restore


def test_render_joins_header_and_sections_with_blank_lines() -> None:
    assert render("# Wakeup", [section("a", ["x"]), section("b", [])]) == "# Wakeup\n\n## A\nx\n\n## B\n(none)\n"


def test_item_cap_is_a_tenth_of_the_budget_but_at_least_forty() -> None:
    assert item_cap(2509) == 250 and isinstance(item_cap(2509), int)
    assert item_cap(400) == 40 and item_cap(399) == 40 and item_cap(10) == 40


def longest_fitting(text: str, limit: int, ref: str) -> str:
    """What cut_text must return, found the slow way: the longest prefix whose marked form fits."""
    best = None
    for n in range(len(text) + 1):
        marked = f"{text[:n].rstrip()} … [cut {len(text) - n:,} chars to fit; whole: {ref}]"
        if estimate_tokens(marked) <= limit:
            best = marked
    assert best is not None
    return best


def test_cut_text_keeps_the_longest_prefix_that_fits_with_its_mark() -> None:
    for text in ("a" * 400, "word " * 90, "决" * 120, "ab决 " * 50):
        for limit in (20, 21, 40, 57):
            assert cut_text(text, limit, "agentd recall X") == longest_fitting(text, limit, "agentd recall X"), (text, limit)
    # when only the mark fits, the mark is kept with an empty prefix (one CJK character is one token)
    tiny = estimate_tokens(" … [cut 120 chars to fit; whole: R]")
    assert cut_text("决" * 120, tiny, "R") == " … [cut 120 chars to fit; whole: R]"


def test_a_text_of_exactly_the_limit_is_not_cut() -> None:
    text = "a" * 160  # 40 tokens
    assert cut_text(text, 40, "R") == text
    assert cut_text(text + "a", 40, "R") != text + "a"


def test_under_budget_nothing_is_cut_or_trimmed_even_a_long_item() -> None:
    long = "x" * 400  # 100 tokens, over the item cap of 40
    sections = [section("facts", [long])]
    text = render("H", sections)
    assert fit("H", sections, estimate_tokens(text), ["facts"]) == text  # exactly the budget: it fits
    assert sections[0].items == [long] and sections[0].cut == 0 and sections[0].trimmed == 0


def test_over_budget_long_items_are_cut_with_their_ref_but_never_the_constraints() -> None:
    rule = "- never " + "y" * 400
    constraints = section(NEVER_CUT, [rule])
    facts = section("facts", ["z" * 400, "short fact"], refs=["agentd recall F-1"])
    notes = section("notes", ["n" * 400], restore="agentd recall --kind engram")
    budget = 300
    fit("H", [constraints, facts, notes], budget, ["notes", "facts"])
    assert constraints.items == [rule] and constraints.cut == 0
    assert facts.cut == 1 and notes.cut == 1
    cap = item_cap(budget)
    assert facts.items[0] == cut_text("z" * 400, cap, "agentd recall F-1") and facts.items[1] == "short fact"
    assert notes.items[0].endswith("whole: agentd recall --kind engram]")


def test_an_item_of_exactly_the_cap_is_not_cut() -> None:
    exact = "e" * 160  # 40 tokens: the cap of a budget of 400
    s = section("facts", [exact, "f" * 2000])
    fit("H", [s], 400, ["facts"])
    assert s.items[0] == exact and s.cut == 1


ITEM = "i" * 360  # 90 tokens: under the item cap of any budget from 900 on, so nothing is cut


def three(backtrack: int = 6, facts: int = 6) -> list[Section]:
    return [section("task", [ITEM]),
            section("facts", [f"{n} {ITEM}" for n in range(facts)], refs=[f"r{n}" for n in range(facts)]),
            section("backtrack", [f"{n} {ITEM}" for n in range(backtrack)], restore="agentd recall --kind decision")]


def cost(sections: list[Section], trimmed: dict[str, int]) -> int:
    for s in sections:
        s.trimmed = trimmed.get(s.key, 0)
    return estimate_tokens(render("H", sections))


ORDER = ["backtrack", "facts", "task"]


def test_trimming_takes_the_least_important_sections_last_items_first_and_stops_at_the_budget() -> None:
    budget = cost(three(backtrack=5), {"backtrack": 1})  # exactly the cost with one item fewer
    sections = three()
    text = fit("H", sections, budget, ORDER)
    task, facts, back = sections
    assert back.items == [f"{n} {ITEM}" for n in range(5)] and back.trimmed == 1
    assert facts.trimmed == 0 and len(facts.items) == 6 and task.trimmed == 0
    assert estimate_tokens(text) == budget and text == render("H", sections)
    assert "[trimmed 1 item(s) to fit the budget; get them with: agentd recall --kind decision]" in text


def test_a_section_is_emptied_before_the_next_one_loses_anything_and_refs_go_with_their_items() -> None:
    budget = cost(three(backtrack=0, facts=11), {"backtrack": 6, "facts": 1})
    sections = three(facts=12)
    fit("H", sections, budget, ORDER)
    task, facts, back = sections
    assert back.items == [] and back.trimmed == 6
    assert facts.items == [f"{n} {ITEM}" for n in range(11)] and facts.refs == [f"r{n}" for n in range(11)]
    assert facts.trimmed == 1 and task.items == [ITEM]
    over = three(facts=12)
    fit("H", over, budget - 1, ORDER)  # one token less: one more fact goes
    assert over[1].trimmed == 2 and over[1].refs == [f"r{n}" for n in range(10)]


def test_the_constraints_are_never_trimmed_even_when_named_and_over_budget() -> None:
    rules = [f"- rule {i} " + "r" * 200 for i in range(5)]
    constraints = section(NEVER_CUT, list(rules))
    other = section("facts", ["f" * 100])
    text = fit("H", [constraints, other], 50, [NEVER_CUT, "facts", "missing"])
    assert constraints.items == rules and constraints.trimmed == 0 and constraints.cut == 0
    assert other.items == [] and other.trimmed == 1
    assert all(rule in text for rule in rules)  # over budget: the constraints alone are too long


def test_sections_missing_from_the_trim_order_keep_their_items() -> None:
    kept = section("kept", ["k" * 200])
    gone = Section("gone", "Gone", ["g" * 200, "h" * 200])  # items given whole, without refs
    fit("H", [kept, gone], 20, ["gone"])
    assert kept.items and kept.trimmed == 0 and gone.items == [] and gone.trimmed == 2 and gone.refs == []
