"""A spec file as the user wrote it: YAML read with node positions, and problem reports that point into it.

Why positions: a report of every problem of a file is only useful when each problem says where it is,
so the loader keeps the line and column of every key and list item (PyYAML's composed nodes carry
them) next to the plain data that pydantic validates. Why all problems at once: each round trip through
the DAG processor costs the user minutes; one report lets them fix the whole file in one edit.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from kafka_ferry.core.common.failures import Permanent

Location = tuple[Any, ...]  # a path into the document: mapping keys and list indexes
Position = tuple[int, int]  # 1-based line and column

_MISSING = object()


@dataclass(frozen=True)
class SpecProblem:
    """One problem of a spec file: where (dotted field, line), what was given and why it is refused.

    A syntax problem has no field: it renders as ``file:line:column: problem`` with the line quoted.
    """

    field: str | None
    value: Any
    problem: str
    line: int | None = None
    column: int | None = None
    excerpt: str = ""

    @property
    def missing(self) -> bool:
        return self.value is _MISSING

    def render(self, path: str) -> str:
        where = path if self.line is None else f"{path}:{self.line}"
        if self.field is None:
            text = f"{where}:{self.column}: {self.problem}" if self.column is not None else f"{where}: {self.problem}"
        elif self.missing:
            text = f"{where}: field '{self.field}' is missing: {self.problem}"
        else:
            text = f"{where}: field '{self.field}' = {self.value!r}: {self.problem}"
        return text + (f"\n{self.excerpt}" if self.excerpt else "")

    def sort_key(self) -> tuple[Any, ...]:
        # Problems without a line (a missing top-level field) go last: they belong to no line of the file.
        return (self.line is None, self.line or 0, self.column or 0, self.field or "")


def missing_value() -> Any:
    """The value of a problem about a field that was not given (rendered as 'is missing', not as a value)."""
    return _MISSING


class SpecError(Permanent, ValueError):
    """Every problem of one spec file, sorted by their position in it; one line per problem."""

    def __init__(self, path: str | Path, problems: list[SpecProblem]):
        if not problems:
            raise ValueError("a SpecError needs at least one problem")
        self.path = str(path)
        self.problems = sorted(problems, key=SpecProblem.sort_key)
        first = self.problems[0]
        # The first problem, for callers that handle one at a time.
        self.field, self.problem = first.field, first.problem
        self.value = None if first.missing else first.value
        lines = [p.render(self.path) for p in self.problems]
        if len(lines) > 1:
            lines.insert(0, f"{self.path}: {len(lines)} problems in this migration spec")
        super().__init__("\n".join(lines))


# A migration spec is a few kilobytes; a file far larger is a mistake or an attack on the dag-processor.
MAX_SPEC_BYTES = 256 * 1024
# Nesting deeper than any spec needs; PyYAML composes recursively, so a deep file would exhaust the stack.
MAX_DEPTH = 64


def read_yaml(path: Path) -> tuple[Any, dict[Location, Position]]:
    """The document's data and the position of every key and list item; SpecError on unreadable or bad YAML.

    Bounded before anything is built: the file's size, its nesting depth, and no anchors or aliases at all.
    Why no aliases: each alias level multiplies the document (a few hundred bytes of nested aliases expand to
    gigabytes: a "billion laughs"); a spec never needs them, so refusing them costs nothing and bounds the
    work to the file's size.
    """
    try:
        with path.open("rb") as raw:
            data_bytes = raw.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise SpecError(path, [SpecProblem(None, None, f"cannot read: {exc.strerror}")]) from None
    if len(data_bytes) > MAX_SPEC_BYTES:
        raise SpecError(path, [SpecProblem(None, None, f"larger than {MAX_SPEC_BYTES} bytes: a migration spec is "
                                                       "a few kilobytes; refused unread", line=1)])
    try:
        text = data_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(path, [SpecProblem(None, None, f"not UTF-8 text (byte {exc.start})")]) from None
    bounded = _bounded_events(text)
    if bounded:
        raise SpecError(path, bounded)
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        raise SpecError(path, [syntax_problem(exc, text)]) from None
    except yaml.YAMLError as exc:
        raise SpecError(path, [SpecProblem(None, None, f"not valid YAML: {exc}")]) from None
    finally:
        loader.dispose()
    positions: dict[Location, Position] = {}
    duplicates: list[SpecProblem] = []
    if node is not None:
        _walk(node, (), positions, duplicates)
    if duplicates:
        raise SpecError(path, duplicates)
    return data, positions


def _bounded_events(text: str) -> list[SpecProblem]:
    """Every anchor and alias of the document, and nesting past MAX_DEPTH, as located problems.

    Read from the parser's event stream: linear in the file's size, and nothing is expanded or built yet.
    A syntax error is left to the composer, which reports it with context.
    """
    problems: list[SpecProblem] = []
    depth = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            mark = event.start_mark
            line, column = (mark.line + 1, mark.column + 1) if mark is not None else (None, None)
            anchor = getattr(event, "anchor", None)  # alias events and node events carry one
            refused = (f"alias '*{anchor}'" if isinstance(event, yaml.AliasEvent)
                       else f"anchor '&{anchor}'" if anchor else "")
            if refused:
                problems.append(SpecProblem(None, None, f"YAML {refused} refused: a migration spec holds no anchors "
                                                        "or aliases (write the value out)", line=line, column=column))
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    problems.append(SpecProblem(None, None, f"nested deeper than {MAX_DEPTH} levels", line=line,
                                                column=column))
                    break
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
            if len(problems) >= 50:  # enough to fix the file; the rest would say the same
                break
    except yaml.YAMLError:
        return problems  # the syntax error itself is reported by the composer, with its context
    return problems


def syntax_problem(exc: yaml.MarkedYAMLError, text: str) -> SpecProblem:
    """`line:column: problem`, located where the user must look, with that line quoted and a caret under it.

    Why the context mark sometimes: an unclosed bracket or quote is reported at the end of the file,
    which holds nothing to look at; the place to fix is where the bracket or quote was opened.
    """
    lines = text.splitlines()
    mark, context = exc.problem_mark, exc.context_mark
    problem = exc.problem or "not valid YAML"
    at_end = mark is None or mark.line >= len(lines) or not lines[mark.line].strip()
    if context is not None and at_end:
        mark, problem = context, f"{problem} ({exc.context} that starts here)"
    elif exc.context:
        where = f" at line {context.line + 1}, column {context.column + 1}" if context is not None else ""
        problem = f"{problem} ({exc.context}{where})"
    if mark is None:
        return SpecProblem(None, None, problem)
    excerpt = ""
    if mark.line < len(lines):
        number = f"{mark.line + 1:>4} | "
        excerpt = f"{number}{lines[mark.line]}\n{' ' * (len(number) - 2)}| {' ' * mark.column}^"
    return SpecProblem(None, None, problem, line=mark.line + 1, column=mark.column + 1, excerpt=excerpt)


def _walk(node: yaml.Node, location: Location, positions: dict[Location, Position],
          duplicates: list[SpecProblem]) -> None:
    if isinstance(node, yaml.MappingNode):
        first_seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else repr(key_node.value)
            line = key_node.start_mark.line + 1
            if key in first_seen:
                duplicates.append(SpecProblem(
                    dotted(location + (key,)), value_node.value if isinstance(value_node, yaml.ScalarNode) else None,
                    f"given twice (first at line {first_seen[key]}); YAML would silently keep only the last",
                    line=line, column=key_node.start_mark.column + 1))
                continue
            first_seen[key] = line
            positions[location + (key,)] = (line, key_node.start_mark.column + 1)
            _walk(value_node, location + (key,), positions, duplicates)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            positions[location + (index,)] = (item.start_mark.line + 1, item.start_mark.column + 1)
            _walk(item, location + (index,), positions, duplicates)


def dotted(location: Location) -> str:
    """`copy.max_records_per_partition`, `topics.include[0]`; `<root>` for the document itself."""
    parts: list[str] = []
    for item in location:
        parts.append(f"[{item}]" if isinstance(item, int) else ("." if parts else "") + str(item))
    return "".join(parts) or "<root>"


def position_of(location: Location, positions: Mapping[Location, Position]) -> Position | None:
    """Where a field is, or where its nearest given parent is (a missing field has no position of its own)."""
    for end in range(len(location), 0, -1):
        if location[:end] in positions:
            return positions[location[:end]]
    return None


def located(location: Location, value: Any, problem: str, positions: Mapping[Location, Position]) -> SpecProblem:
    line, column = position_of(location, positions) or (None, None)
    return SpecProblem(dotted(location), value, problem, line=line, column=column)


def validation_problems(exc: ValidationError, positions: Mapping[Location, Position],
                        root: type[BaseModel]) -> list[SpecProblem]:
    """Every pydantic error of a document as a located problem, minus those that only follow from another."""
    errors = exc.errors()
    return [_pydantic_problem(e, positions, root) for e in errors if not _follows_from_another(e, errors)]


def _pydantic_problem(error: Mapping[str, Any], positions: Mapping[Location, Position],
                      root: type[BaseModel]) -> SpecProblem:
    location = tuple(
        item for i, item in enumerate(error["loc"])
        # the discriminator tag pydantic inserts into union locations is no field of the file
        if not (i > 0 and error["loc"][i - 1] == "rename" and item in ("identity", "prefix"))
    )
    if error["type"] == "missing":
        return located(location, missing_value(), "required, and has no default", positions)
    if error["type"] == "too_short":
        return located(location, error.get("input"), f"needs at least {error['ctx']['min_length']} item(s)",
                       positions)
    if error["type"] == "extra_forbidden":
        return located(location, error.get("input"), _unknown_key(location, root), positions)
    return located(location, error.get("input"), error["msg"].removeprefix("Value error, "), positions)


def _follows_from_another(error: Mapping[str, Any], errors: list[Any]) -> bool:
    """A list too short only because its bad items were dropped: the bad items are the problems to show."""
    loc = tuple(error["loc"])
    return error["type"] == "too_short" and any(tuple(e["loc"])[:len(loc)] == loc and e is not error for e in errors)


def _unknown_key(location: Location, root: type[BaseModel]) -> str:
    """Name the keys allowed where an unknown one was given, and the likely one for a typo."""
    models: list[Any] = [root]
    for key in location[:-1]:
        fields = {f.alias or name: f for m in models for name, f in m.model_fields.items()}
        annotation = fields[key].annotation if key in fields else None
        models = [a for a in (annotation, *getattr(annotation, "__args__", ()))
                  if isinstance(a, type) and issubclass(a, BaseModel)]
        if not models:
            return "unknown key"
    known = sorted({f.alias or name for m in models for name, f in m.model_fields.items()})
    guess = difflib.get_close_matches(str(location[-1]), known, n=1, cutoff=0.5)
    return f"unknown key{f' (did you mean {guess[0]!r}?)' if guess else ''}; known here: {', '.join(known)}"
