"""Fixed relation set and per-scene object vocabularies.

The eight relations form four inverse pairs; a relation's index XOR 1 is its
inverse, which lets the array code invert relations without lookups.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import permutations, product
from pathlib import Path
from typing import Any

import yaml

from sgvla.paths import CONFIG_DIR

RELATIONS: tuple[str, ...] = (
    "is_left_of",
    "is_right_of",
    "is_in_front_of",
    "is_behind",
    "is_on_top_of",
    "is_below_of",
    "is_inside",
    "contains",
)
RELATION_INDEX: dict[str, int] = {name: i for i, name in enumerate(RELATIONS)}
INVERSE: dict[str, str] = {name: RELATIONS[i ^ 1] for i, name in enumerate(RELATIONS)}
# The paper's four families are named after the first relation of each pair.
FAMILIES: dict[str, str] = {name: RELATIONS[i & ~1] for i, name in enumerate(RELATIONS)}

ONTOLOGY_DIR = CONFIG_DIR / "ontology"

MAX_ASSIGNMENTS = 64
_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_SUFFIX_RE = re.compile(r"_\d+$")
_ARTICLES = frozenset({"the", "a", "an"})
_YAML_KEYS = frozenset({"name", "objects", "manipulated", "interchangeable", "aliases", "ambiguous"})


def display_name(obj: str) -> str:
    """Strip the instance suffix: ``plate_1`` -> ``plate``."""
    return _SUFFIX_RE.sub("", obj)


def words_of(text: str) -> list[str]:
    """Lower-case words; anything but letters and digits separates them (underscores too)."""
    return re.sub(r"[^0-9a-z]+", " ", text.lower()).split()


def name_key(text: str) -> str:
    """Normalize a free-text object name for lookup: case, separators and leading articles.

    ``"The Cookie-Box"`` and ``"cookie_box"`` share the key ``cookie_box``.
    """
    words = words_of(text)
    while words and words[0] in _ARTICLES:
        words.pop(0)
    return "_".join(words)


@dataclass(frozen=True)
class Ontology:
    """Object vocabulary of one scene plus the names a model may use for its objects.

    ``interchangeable`` lists groups of visually identical instances (the two
    bowls); scoring accepts any permutation of names within a group.
    ``aliases`` maps extra free-text names to objects; ``ambiguous`` lists names
    that could mean several objects and are rejected by the parser. Suffix-free
    display names are added as aliases when they name exactly one object, and
    as ambiguous otherwise.
    """

    name: str
    objects: tuple[str, ...]
    manipulated: str
    interchangeable: tuple[tuple[str, ...], ...] = ()
    aliases: dict[str, str] = field(default_factory=dict, hash=False)
    ambiguous: tuple[str, ...] = ()
    _lookup: dict[str, str] = field(init=False, repr=False, compare=False, hash=False)
    _ambiguous_keys: frozenset[str] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "objects", tuple(self.objects))
        object.__setattr__(self, "interchangeable", tuple(tuple(g) for g in self.interchangeable))
        object.__setattr__(self, "ambiguous", tuple(self.ambiguous))
        self._validate()
        lookup, ambiguous_keys = self._build_lookup()
        object.__setattr__(self, "_lookup", lookup)
        object.__setattr__(self, "_ambiguous_keys", frozenset(ambiguous_keys))

    def _validate(self) -> None:
        if not self.objects:
            raise ValueError(f"ontology {self.name!r}: empty object vocabulary")
        for obj in self.objects:
            if not isinstance(obj, str) or not _NAME_RE.match(obj):
                raise ValueError(f"ontology {self.name!r}: bad object name {obj!r} (letters, digits, '_')")
        duplicates = sorted({o for o in self.objects if self.objects.count(o) > 1})
        if duplicates:
            raise ValueError(f"ontology {self.name!r}: duplicate objects {duplicates}")
        if self.manipulated not in self.objects:
            raise ValueError(f"ontology {self.name!r}: manipulated object {self.manipulated!r} not in objects")
        grouped: set[str] = set()
        for group in self.interchangeable:
            if len(group) < 2:
                raise ValueError(f"ontology {self.name!r}: interchangeable group {list(group)} needs 2+ objects")
            for obj in group:
                if obj not in self.objects:
                    raise ValueError(f"ontology {self.name!r}: interchangeable object {obj!r} not in objects")
                if obj in grouped:
                    raise ValueError(f"ontology {self.name!r}: object {obj!r} in two interchangeable groups")
                grouped.add(obj)
        if len(self.assignments()) > MAX_ASSIGNMENTS:
            raise ValueError(
                f"ontology {self.name!r}: interchangeable groups allow more than {MAX_ASSIGNMENTS} assignments"
            )
        for alias, target in self.aliases.items():
            if target not in self.objects:
                raise ValueError(f"ontology {self.name!r}: alias {alias!r} names unknown object {target!r}")

    def _build_lookup(self) -> tuple[dict[str, str], set[str]]:
        lookup = {name_key(obj): obj for obj in self.objects}
        by_display: dict[str, list[str]] = {}
        for obj in self.objects:
            by_display.setdefault(name_key(display_name(obj)), []).append(obj)
        ambiguous_keys = {name_key(a) for a in self.ambiguous}
        for key, objs in by_display.items():
            if len(objs) == 1:
                lookup.setdefault(key, objs[0])
            elif key not in lookup:
                ambiguous_keys.add(key)
        target = self.manipulated
        for key in (name_key("target_" + target), name_key("target_" + display_name(target))):
            lookup[key] = target
        for alias, obj in self.aliases.items():
            key = name_key(alias)
            if not key:
                raise ValueError(f"ontology {self.name!r}: empty alias {alias!r}")
            if lookup.get(key, obj) != obj:
                raise ValueError(f"ontology {self.name!r}: alias {alias!r} conflicts with object {lookup[key]!r}")
            lookup[key] = obj
        clash = sorted(ambiguous_keys & lookup.keys())
        if clash:
            raise ValueError(f"ontology {self.name!r}: names both ambiguous and resolvable: {clash}")
        return lookup, ambiguous_keys

    def resolve(self, text: str) -> str | None:
        """The object a free-text name means, or None when unknown or ambiguous."""
        return self._lookup.get(name_key(text))

    def is_ambiguous(self, text: str) -> bool:
        return name_key(text) in self._ambiguous_keys

    def assignments(self) -> list[dict[str, str]]:
        """Every renaming allowed by the interchangeable groups, identity first."""
        per_group = [[dict(zip(g, p)) for p in permutations(g)] for g in self.interchangeable]
        result = []
        for combo in product(*per_group):
            mapping = {k: v for part in combo for k, v in part.items() if k != v}
            result.append(mapping)
        return result

    @classmethod
    def from_yaml(cls, path: str | Path) -> Ontology:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"ontology file not found: {path}")
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise ValueError(f"{path}: not valid YAML: {exc}") from exc
        try:
            return cls._from_mapping(data)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{path}: {exc}") from exc

    @classmethod
    def _from_mapping(cls, data: Any) -> Ontology:
        if not isinstance(data, dict):
            raise ValueError("top level must be a mapping")
        unknown = sorted(set(data) - _YAML_KEYS)
        if unknown:
            raise ValueError(f"unknown keys {unknown}; allowed: {sorted(_YAML_KEYS)}")
        missing = sorted({"name", "objects", "manipulated"} - set(data))
        if missing:
            raise ValueError(f"missing keys {missing}")
        objects = data["objects"] or []
        groups = data.get("interchangeable") or []
        aliases = data.get("aliases") or {}
        ambiguous = data.get("ambiguous") or []
        if not isinstance(objects, list):
            raise ValueError("'objects' must be a list")
        if not isinstance(groups, list) or not all(isinstance(g, list) for g in groups):
            raise ValueError("'interchangeable' must be a list of lists")
        if not isinstance(aliases, dict):
            raise ValueError("'aliases' must be a mapping of name -> object")
        if not isinstance(ambiguous, list):
            raise ValueError("'ambiguous' must be a list")
        return cls(
            name=str(data["name"]),
            objects=tuple(objects),
            manipulated=data["manipulated"],
            interchangeable=tuple(tuple(g) for g in groups),
            aliases={str(k): v for k, v in aliases.items()},
            ambiguous=tuple(str(a) for a in ambiguous),
        )


def load_ontology(name_or_path: str | Path) -> Ontology:
    """Load ``config/ontology/<name>.yaml`` or an explicit YAML path."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = ONTOLOGY_DIR / f"{name_or_path}.yaml"
    return Ontology.from_yaml(path)
