"""The mutants of one module: small wrong changes found by walking its syntax tree.

Each :class:`Mutant` replaces one span of the source (an expression, an
operator's operands, a statement) with a changed one, so the mutated module is
the original text with that one span spliced in.  The operators are the usual
ones of mutation testing, chosen for the bugs a pure policy module can have:

``binop``    ``+``/``-``, ``*``/``/``, ``//`` -> ``/``, ``%`` -> ``*``, ``**`` -> ``*``
``compare``  ``<``/``<=``, ``>``/``>=``, ``==``/``!=``, ``in``/``not in``, ``is``/``is not``
``boolop``   ``and``/``or``
``unary``    ``not x`` -> ``x``, ``-x`` -> ``x``
``number``   ``n`` -> ``n + 1``
``bool``     ``True``/``False``
``string``   ``"s"`` -> ``""``, ``""`` -> ``"XX"``
``return``   ``return x`` -> ``return None``
``cond``     the test of an ``if``, ``while``, conditional expression or comprehension filter negated
``minmax``   ``min(...)``/``max(...)``
``stmt``     an augmented assignment or a call statement replaced by ``pass``
``loop``     ``break``/``continue``

Left alone: docstrings, annotations, decorators (``frozen=True``), f-strings (message text), the arguments
of a ``raise`` (error messages), ``__all__``, and any line that says
``# pragma: no mutate``.

Each mutant has a stable ``key`` (the enclosing function, the original text and
its replacement, and which occurrence it is) so that a reason for an
equivalent mutant survives edits elsewhere in the module.
"""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass

_BINOPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Div,
    ast.Mod: ast.Mult, ast.Pow: ast.Mult, ast.BitOr: ast.BitAnd, ast.BitAnd: ast.BitOr, ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
}
_CMPOPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
    ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}
NO_MUTATE = "pragma: no mutate"


@dataclass(frozen=True)
class Mutant:
    """One change: ``source[start:end]`` (character offsets) becomes ``replacement``."""

    key: str
    operator: str
    line: int
    start: int
    end: int
    original: str
    replacement: str

    def apply(self, source: str) -> str:
        return source[: self.start] + self.replacement + source[self.end :]

    def describe(self) -> str:
        return f"line {self.line}: {_short(self.original)} -> {_short(self.replacement)}"


def _short(text: str, width: int = 70) -> str:
    one = " ".join(text.split())
    return one if len(one) <= width else one[: width - 3] + "..."


class _Offsets:
    """Character offsets of (line, column) positions; ast columns count UTF-8 bytes."""

    def __init__(self, source: str) -> None:
        self.lines = source.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def at(self, line: int, col_bytes: int) -> int:
        text = self.lines[line - 1] if line - 1 < len(self.lines) else ""
        return self.starts[line - 1] + len(text.encode()[:col_bytes].decode(errors="ignore"))


def _docstring_ids(tree: ast.AST) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                out.add(id(first.value))
    return out


def _skipped_ids(tree: ast.AST) -> set[int]:
    """Nodes (and everything below them) that are never mutated."""
    out: set[int] = set()

    def skip(node: ast.AST | None) -> None:
        if node is not None:
            out.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for decorator in node.decorator_list:
                skip(decorator)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            skip(node.returns)
            for arg in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs, node.args.vararg, node.args.kwarg):
                if arg is not None:
                    skip(arg.annotation)
        elif isinstance(node, ast.AnnAssign):
            skip(node.annotation)
        elif isinstance(node, ast.JoinedStr):
            skip(node)
        elif isinstance(node, ast.Raise):
            skip(node.exc)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            skip(node)
        elif isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            skip(node)
        elif isinstance(node, ast.ImportFrom) or isinstance(node, ast.Import):
            skip(node)
    return out


def mutants(source: str) -> list[Mutant]:
    """Every mutant of ``source`` (a module's text), in source order."""
    tree = ast.parse(source)
    offsets = _Offsets(source)
    docstrings = _docstring_ids(tree)
    skipped = _skipped_ids(tree)
    no_mutate = {i + 1 for i, line in enumerate(source.splitlines()) if NO_MUTATE in line}
    qualnames: dict[int, str] = {}

    def name_scopes(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            here = prefix
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                here = f"{prefix}.{child.name}" if prefix else child.name
            qualnames[id(child)] = here
            name_scopes(child, here)

    name_scopes(tree, "")
    found: list[tuple[str, int, int, int, str]] = []  # operator, line, start, end, replacement

    def span(node: ast.AST) -> tuple[int, int]:
        return (offsets.at(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                offsets.at(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]

    def add(operator: str, node: ast.AST, replacement: str) -> None:
        if node.lineno in no_mutate or id(node) in skipped:  # type: ignore[attr-defined]
            return
        start, end = span(node)
        found.append((operator, node.lineno, start, end, replacement))  # type: ignore[attr-defined]

    def expr(node: ast.expr) -> str:
        return "(" + ast.unparse(node) + ")"

    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            add("binop", node, expr(ast.BinOp(node.left, _BINOPS[type(node.op)](), node.right)))
        elif isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in _CMPOPS:
                    ops = list(node.ops)
                    ops[i] = _CMPOPS[type(op)]()
                    add("compare", node, expr(ast.Compare(node.left, ops, node.comparators)))
        elif isinstance(node, ast.BoolOp):
            other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            add("boolop", node, expr(ast.BoolOp(other, node.values)))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
            add("unary", node, expr(node.operand))
        elif isinstance(node, ast.Constant) and id(node) not in docstrings:
            value = node.value
            if isinstance(value, bool):
                add("bool", node, repr(not value))
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                add("number", node, "(" + repr(value + 1) + ")")
            elif isinstance(value, str):
                add("string", node, '""' if value else '"XX"')
        elif isinstance(node, ast.Return) and node.value is not None and not (
                isinstance(node.value, ast.Constant) and node.value.value is None):
            add("return", node, "return None")
        elif isinstance(node, (ast.If, ast.While, ast.IfExp)):
            add("cond", node.test, "(not " + expr(node.test) + ")")
        elif isinstance(node, ast.comprehension):
            for test in node.ifs:
                add("cond", test, "(not " + expr(test) + ")")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
            add("minmax", node.func, "max" if node.func.id == "min" else "min")
        elif isinstance(node, ast.AugAssign) or (
                isinstance(node, ast.Expr) and isinstance(node.value, (ast.Call, ast.Await))):
            add("stmt", node, "pass")
        elif isinstance(node, ast.Break):
            add("loop", node, "continue")
        elif isinstance(node, ast.Continue):
            add("loop", node, "break")

    found.sort(key=lambda f: (f[2], f[3], f[0], f[4]))
    seen: Counter[str] = Counter()
    out: list[Mutant] = []
    for operator, line, start, end, replacement in found:
        original = source[start:end]
        scope = _scope_at(tree, qualnames, line) or "<module>"
        base = f"{scope}: {_short(original, 60)} -> {_short(replacement, 60)}"
        seen[base] += 1
        key = base if seen[base] == 1 else f"{base} #{seen[base]}"
        out.append(Mutant(key, operator, line, start, end, original, replacement))
    return out


def _scope_at(tree: ast.AST, qualnames: dict[int, str], line: int) -> str:
    """The innermost function or class containing ``line``."""
    best, size = "", None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if first <= line <= (node.end_lineno or node.lineno):
                extent = (node.end_lineno or node.lineno) - first
                if size is None or extent < size:
                    best, size = qualnames.get(id(node), node.name), extent
    return best


def check(source: str, mutant: Mutant) -> bool:
    """Whether the mutated text still compiles (a splice that does not is dropped, never counted)."""
    try:
        compile(mutant.apply(source), "<mutant>", "exec")
    except SyntaxError:
        return False
    return True
