"""LIBERO task files (BDDL): what a scene contains, and the same scene without some objects.

A small s-expression reader is enough: LIBERO's own parser needs robosuite and
builds the whole scene, while perturbation checks only need names and predicates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SExpr = str | list["SExpr"]
_TOKEN = re.compile(r"\(|\)|[^\s()]+")


def parse_sexpr(text: str) -> list[SExpr]:
    """Top-level expressions of ``text`` (``;`` comments dropped)."""
    text = "\n".join(line.split(";", 1)[0] for line in text.splitlines())
    stack: list[list[SExpr]] = [[]]
    for token in _TOKEN.findall(text):
        if token == "(":
            stack.append([])
        elif token == ")":
            if len(stack) == 1:
                raise ValueError("unbalanced ')' in BDDL")
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(token)
    if len(stack) != 1:
        raise ValueError("unbalanced '(' in BDDL")
    return stack[0]


def format_sexpr(expr: SExpr, indent: int = 0) -> str:
    """Leading atoms on the opening line, then one line per remaining element."""
    pad = "  " * indent
    if isinstance(expr, str):
        return pad + expr
    k = next((i for i, e in enumerate(expr) if isinstance(e, list)), len(expr))
    head = pad + "(" + " ".join(expr[:k])  # type: ignore[arg-type]
    if k == len(expr):
        return head + ")"
    return "\n".join([head, *(format_sexpr(e, indent + 1) for e in expr[k:])]) + ")"


def _section(problem: list[SExpr], key: str) -> list[SExpr]:
    for item in problem:
        if isinstance(item, list) and item and item[0] == key:
            return item[1:]
    return []


def _typed_names(items: list[SExpr]) -> dict[str, str]:
    """``a b - type c - other`` -> {a: type, b: type, c: other}."""
    names: dict[str, str] = {}
    pending: list[str] = []
    atoms = [i for i in items if isinstance(i, str)]
    k = 0
    while k < len(atoms):
        if atoms[k] == "-" and k + 1 < len(atoms):
            names.update({n: atoms[k + 1] for n in pending})
            pending, k = [], k + 2
        else:
            pending.append(atoms[k])
            k += 1
    names.update({n: "object" for n in pending})
    return names


def _predicates(items: list[SExpr]) -> list[list[str]]:
    """Binary predicates ``(Name a b)``, also inside ``(And ...)``."""
    found: list[list[str]] = []
    for item in items:
        if isinstance(item, list) and len(item) == 3 and all(isinstance(p, str) for p in item):
            found.append(item)  # type: ignore[arg-type]
        elif isinstance(item, list):
            found += _predicates(item[1:])
    return found


def _atoms(expr: SExpr) -> list[str]:
    return [expr] if isinstance(expr, str) else [a for e in expr for a in _atoms(e)]


@dataclass(frozen=True)
class BddlProblem:
    """Names and predicates of one task file.

    ``placements`` maps each placed entity to what it was placed on in ``:init``
    (an object, or a region such as ``wooden_cabinet_1_top_side``);
    ``region_owner`` maps such a region to the object or fixture it belongs to.
    """

    path: Path
    tree: list[SExpr]
    objects: dict[str, str]
    fixtures: dict[str, str]
    goal_objects: tuple[str, ...]
    goal_placements: tuple[tuple[str, str], ...]
    placements: dict[str, str]
    language: str

    @classmethod
    def read(cls, path: str | Path) -> BddlProblem:
        path = Path(path)
        return cls.parse(path.read_text(encoding="utf-8"), path)

    @classmethod
    def parse(cls, text: str, path: Path = Path("<string>")) -> BddlProblem:
        tree = parse_sexpr(text)
        if not tree or not isinstance(tree[0], list) or tree[0][:1] != ["define"]:
            raise ValueError(f"{path}: not a BDDL problem (no top-level 'define')")
        problem = tree[0]
        objects = _typed_names(_section(problem, ":objects"))
        fixtures = _typed_names(_section(problem, ":fixtures"))
        entities = set(objects) | set(fixtures)
        interest = [a for a in _atoms(_section(problem, ":obj_of_interest")) if a in entities]
        goal = [a for a in _atoms(_section(problem, ":goal")) if a in entities]
        placements = {pred[1]: pred[2] for pred in _predicates(_section(problem, ":init")) if pred[0].lower() in ("on", "in")}
        goal_placements = tuple(
            (pred[1], pred[2]) for pred in _predicates(_section(problem, ":goal")) if pred[0].lower() in ("on", "in")
        )
        language = " ".join(_atoms(_section(problem, ":language")))
        return cls(path, tree, objects, fixtures, tuple(dict.fromkeys(interest + goal)), goal_placements, placements,
                   language)

    @property
    def entities(self) -> tuple[str, ...]:
        return (*self.fixtures, *self.objects)

    def region_owner(self, target: str) -> str | None:
        """The entity a placement target belongs to: itself, or the longest entity prefix of a region name."""
        if target in self.fixtures or target in self.objects:
            return target
        owners = [e for e in self.entities if target.startswith(e + "_")]
        return max(owners, key=len) if owners else None

    def supports(self, name: str) -> list[str]:
        """What ``name`` rests on, transitively (bowl -> cookies -> table)."""
        chain: list[str] = []
        current = name
        while current in self.placements:
            owner = self.region_owner(self.placements[current])
            if owner is None or owner in chain or owner == current:
                break
            chain.append(owner)
            current = owner
        return chain

    def dependents(self, name: str) -> list[str]:
        """Entities placed directly on ``name`` or on one of its regions."""
        return [e for e, target in self.placements.items() if e != name and self.region_owner(target) == name]

    def without(self, removed: set[str]) -> str:
        """BDDL text of the same problem without ``removed`` objects (their placements and regions go too)."""
        def keep(item: SExpr) -> bool:
            return not (set(_atoms(item)) & removed)

        problem: list[SExpr] = []
        for item in self.tree[0]:
            if isinstance(item, list) and item and item[0] == ":objects":
                problem.append([":objects", *_retyped(self.objects, removed)])
            elif isinstance(item, list) and item and item[0] in (":init", ":regions"):
                problem.append([item[0], *[i for i in item[1:] if keep(i)]])
            else:
                problem.append(item)
        return format_sexpr(problem) + "\n"


def _retyped(objects: dict[str, str], removed: set[str]) -> list[str]:
    by_type: dict[str, list[str]] = {}
    for name, kind in objects.items():
        if name not in removed:
            by_type.setdefault(kind, []).append(name)
    return [token for kind, names in by_type.items() for token in (*names, "-", kind)]
