"""Related rows for the pipeline: a caller's ``include`` checked, the rule parser's table words
mapped onto relation paths of the table read, and the data versions a cached page with related
rows depends on."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from persistence import Include, InvalidQueryError, ReadOnlyPersistenceFacade, Relation
from rag_agent.specs import Ignored
from rag_agent.understanding.rules.reading import plural

__all__ = ["checked_includes", "reachable_relations", "related_versions", "resolve_words"]

#: How deep a table word is looked for ("lead 7 and their messages": conversations.messages).
_MAX_DEPTH = 2


def checked_includes(include: object) -> tuple[Include, ...]:
    """A caller's ``include`` (relation names or paths, or ``Include`` objects) as
    ``Include``s; a typed error for anything else."""
    if isinstance(include, str | bytes | Include) or not isinstance(include, Iterable):
        raise InvalidQueryError(
            "include must be a sequence of relation names, e.g. include=['conversations']",
            field="include",
        )
    return tuple(Include.of(item) for item in include)


def _relations(facade: ReadOnlyPersistenceFacade, table: str) -> tuple[Relation, ...]:
    try:
        return facade.relations(table)
    except Exception:  # a table the policy refuses has no relation to follow
        return ()


def _path_to(facade: ReadOnlyPersistenceFacade, table: str, wanted: str) -> str | None:
    """The shortest relation path from ``table`` to a relation named ``wanted``."""
    level: list[tuple[str, str]] = [("", table)]
    for _ in range(_MAX_DEPTH):
        following: list[tuple[str, str]] = []
        for prefix, current in level:
            for relation in _relations(facade, current):
                path = f"{prefix}{relation.name}"
                if relation.name == wanted:
                    return path
                following.append((f"{path}.", relation.child_table))
        level = following
    return None


def reachable_relations(facade: ReadOnlyPersistenceFacade, table: str) -> tuple[str, ...]:
    """The names of the relations a table word may name from ``table`` (as deep as
    :func:`resolve_words` looks), each once, in the order found."""
    names: list[str] = []
    level = [table]
    for _ in range(_MAX_DEPTH):
        following: list[str] = []
        for current in level:
            for relation in _relations(facade, current):
                if relation.name not in names:
                    names.append(relation.name)
                following.append(relation.child_table)
        level = following
    return tuple(names)


def resolve_words(
    facade: ReadOnlyPersistenceFacade, table: str, words: Sequence[str]
) -> tuple[tuple[Include, ...], tuple[Ignored, ...]]:
    """The include paths the table words of a request name from ``table``, and the words that
    name no relation of it (ignored, with the reason)."""
    paths: list[str] = []
    ignored: list[Ignored] = []
    for word in words:
        path = _path_to(facade, table, word)
        if path is None:
            ignored.append(Ignored(f"with {word}", f"{plural(table)} have no related {word}"))
        elif path not in paths:
            paths.append(path)
    return tuple(Include(p) for p in paths), tuple(ignored)


def related_versions(
    facade: ReadOnlyPersistenceFacade, table: str, includes: Sequence[Include]
) -> tuple[tuple[str, int], ...]:
    """The data versions of every table ``includes`` reads from ``table`` (for cache keys)."""
    tables: set[str] = set()
    for item in includes:
        current = table
        for name in item.path.split("."):
            relation = next((r for r in _relations(facade, current) if r.name == name), None)
            if relation is None:
                break
            tables.add(relation.child_table)
            current = relation.child_table
    return tuple((t, facade.data_version(t)) for t in sorted(tables))
