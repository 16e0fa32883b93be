"""Turn a validated dataset case into the plain form the scorer reads, doing per-dataset work once.

Tool lists repeat across cases, so their definitions are built once per distinct list and shared: the engine
memoises each definition's schema resolution and validator by identity, so a shared list is resolved once. The
case's ``available_tools`` are what a trace's chat spans are online: the tools offered; the config's tool
schemas fill in for a tool the case does not describe, in the engine, as they do online.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

import orjson

from otel_toolcall_eval.checks.argument_match import Normalizer, Quantity, TextSimilarity, case_sensitive_keys
from otel_toolcall_eval.checks.schema_at import SchemaAt
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.conventions.llm_spans import definition_from
from otel_toolcall_eval.dataset.models import DatasetCase, Difficulty, ExpectedCall, Slice
from otel_toolcall_eval.engine import Scorer
from otel_toolcall_eval.records import ToolDefinition


@dataclass(slots=True, frozen=True)
class ToolSet:
    """The tools a case offered, by name; None when the case lists none (the config's tools then stand alone)."""

    offered: dict[str, ToolDefinition] | None
    # per offered tool with a schema: its arguments compared with case kept (only non-empty sets are listed)
    exact_case: dict[str, frozenset[str]] | None = None
    described: frozenset[str] = frozenset()  # the offered tools that carry a schema (theirs wins over the config's)
    schemas: dict[str, SchemaAt] | None = None  # per described tool: its parameters schema, for argument matching


@dataclass(slots=True)  # not frozen: a frozen init costs ~5x, once per case
class Reference:
    """One acceptable list of calls: the expected one (index 0) or an alternative."""

    calls: tuple[ExpectedCall, ...]
    names: tuple[str, ...]
    counts: dict[str, int]
    batches: tuple[int | None, ...] | None
    # per call: its arguments compare key by key with nothing but equality when they are identical (no
    # alternatives, no optional keys, extras ignored, no free-text field), so a call whose values are identical
    # passes without ``match_arguments`` (``offline.score``); anything else goes through it
    plain: tuple[bool, ...] = ()


@dataclass(slots=True, frozen=True)
class TrajectorySpec:
    """A case's trajectory match (checks.trajectory): its mode, and the argument mode of each tool."""

    mode: str
    args: str
    tool_args: Mapping[str, str]
    decides: bool = False  # the case passes on this verdict (``trajectory.decides``), not on the graded match

    def args_mode(self, tool: str) -> str:
        return self.tool_args.get(tool, self.args)


@dataclass(slots=True)  # not frozen: a frozen init costs ~5x, once per case
class PreparedCase:
    id: str
    line: int
    slice: str
    difficulty: str
    expected_no_tool: bool
    ordered: bool  # order is part of passing (the ordered-dependency slice)
    references: tuple[Reference, ...]
    forbidden: frozenset[str]
    tools: ToolSet
    user_input: str
    session_id: str | None = None  # the dataset's ``session_id``: the conversation this case is a turn of
    trajectory: TrajectorySpec | None = None  # None: no trajectory match for this case (the feature is off)


_NO_TOOLS = ToolSet(None)
_NO_FIELDS: frozenset[str] = frozenset()
_VALUES: dict[Enum, str] = {
    member: member.value for kind in (Slice, Difficulty) for member in kind
}  # enum .value is slow


class Preparer:
    """Everything built once per evaluation: the engine, normaliser, similarity, shared tool sets."""

    def __init__(self, config: EvalConfig, *, max_tool_sets: int = 1024) -> None:
        self.config = config
        self.normalizer: Normalizer = config.arguments.normalizer()
        self.similarity: TextSimilarity = config.arguments.similarity.build()
        self.threshold = config.arguments.similarity.threshold
        policy = config.policy()
        self.policy = policy
        self.scorer = Scorer(policy)  # the one engine: per-call scoring exactly as online
        self.forbidden = policy.must_not_call
        # reports show policy figures only then; undeclared arguments that fail are violations like the others
        self.has_policies = policy.has_trajectory_rules or policy.undeclared_arguments_fail
        self._tool_sets: dict[bytes, ToolSet] = {}
        self._last: tuple[list[dict[str, Any]] | None, ToolSet] = (None, _NO_TOOLS)
        self._max_tool_sets = max_tool_sets
        self._free_text: dict[str, frozenset[str]] = {}
        self.any_free_text = bool(config.arguments.free_text) or any(
            rule.match != "equal" for rules in config.arguments.fields.values() for rule in rules.values()
        )
        self.any_rules = bool(config.arguments.fields)  # arguments.fields: amounts and per-argument text rules
        self._rules: dict[str, tuple[dict[str, Quantity], dict[str, tuple[TextSimilarity, float]]]] = {}
        self._forbidden_sets: dict[tuple[str, ...], frozenset[str]] = {}
        self._config_exact = {
            n: k
            for n, d in policy.tools.items()
            if d.parameters is not None and (k := case_sensitive_keys(d.parameters))
        }
        self.any_exact_case = bool(self._config_exact)  # else only a case's own tool list can keep case
        self._config_schemas = {n: at for n, d in policy.tools.items() if (at := SchemaAt.of(d.parameters)) is not None}
        t = config.trajectory
        self.trajectory = TrajectorySpec(t.mode, t.args, dict(t.tool_args), t.decides) if t.mode is not None else None

    def prepare(self, case: DatasetCase, line: int = 0) -> PreparedCase:
        refs = [self._reference(case.expected_tool_calls)]
        refs += [self._reference(alt) for alt in case.acceptable_alternatives]
        key = tuple(case.must_not_call)
        forbidden = self._forbidden_sets.get(key)
        if forbidden is None:
            forbidden = self.forbidden | frozenset(key)
            if len(self._forbidden_sets) < 4096:
                self._forbidden_sets[key] = forbidden
        effective = case.effective_slice
        return PreparedCase(
            id=case.id,
            line=line,
            slice=_VALUES[effective],
            difficulty=_VALUES[case.difficulty],
            expected_no_tool=case.expected_no_tool,
            ordered=effective is Slice.ORDERED_DEPENDENCY,
            references=tuple(refs),
            forbidden=forbidden,
            tools=self._tools(case.available_tools),
            user_input=case.user_input,
            session_id=case.session_id,
            trajectory=self.trajectory if case.trajectory is None else self._trajectory(case),
        )

    def _trajectory(self, case: DatasetCase) -> TrajectorySpec:
        """The case's own trajectory options over the config's: its mode, its argument modes where it sets them."""
        own = case.trajectory
        assert own is not None
        t = self.config.trajectory
        tool_args = {**t.tool_args, **own.tool_args} if t.tool_args else dict(own.tool_args)
        decides = own.decides if own.decides is not None else t.decides
        return TrajectorySpec(own.mode, own.args if own.args is not None else t.args, tool_args, decides)

    def _reference(self, calls: list[ExpectedCall]) -> Reference:
        names: list[str] = []
        counted: dict[str, int] = {}
        plain: list[bool] = []
        any_batch = False
        free_text = self.any_free_text
        for c in calls:  # one loop, no comprehension frames: this runs for every case
            name = c.name
            names.append(name)
            counted[name] = counted.get(name, 0) + 1
            any_batch = any_batch or c.batch is not None
            plain.append(
                not c.arg_options
                and not c.optional_args
                and c.required_args_only
                and (not free_text or not self.free_fields(name))
            )
        batches = tuple([c.batch for c in calls]) if any_batch else None
        return Reference(tuple(calls), tuple(names), counted, batches, tuple(plain))

    def free_fields(self, tool: str) -> frozenset[str]:
        """The arguments of ``tool`` compared by similarity (``arguments.free_text``)."""
        if not self.any_free_text:
            return _NO_FIELDS
        fields = self._free_text.get(tool)
        if fields is None:
            fields = self.config.arguments.free_text_fields(tool)
            if len(self._free_text) < 4096:
                self._free_text[tool] = fields
        return fields

    def rules(self, tool: str) -> tuple[dict[str, Quantity], dict[str, tuple[TextSimilarity, float]]]:
        """The arguments of ``tool`` compared by amount, and those with their own text similarity
        (``arguments.fields``); built on the tool's first call, so a worker loads pint or the model only when
        a case needs them."""
        found = self._rules.get(tool)
        if found is None:
            arguments = self.config.arguments
            found = (arguments.quantities(tool), arguments.text_rules(tool))
            if len(self._rules) < 4096:
                self._rules[tool] = found
        return found

    def exact_case(self, tool: str, tools: ToolSet) -> frozenset[str]:
        """Arguments of ``tool`` compared with case kept (``case_sensitive_keys`` of the schema the engine uses:
        the case's definition, else the config's); computed once per tool list, so a lookup here is all."""
        exact = tools.exact_case
        if exact is not None and tool in exact:
            return exact[tool]
        if not self._config_exact or tool in tools.described:
            return _NO_FIELDS
        return self._config_exact.get(tool, _NO_FIELDS)

    def schema(self, tool: str, tools: ToolSet) -> SchemaAt | None:
        """The parameters schema of ``tool`` the engine uses (the case's definition, else the config's): where it
        says number, ``1`` is ``1.0`` (``checks.argument_match``)."""
        schemas = tools.schemas
        if schemas is not None and tool in schemas:
            return schemas[tool]
        if tool in tools.described:
            return None
        return self._config_schemas.get(tool)

    def _tools(self, available: list[dict[str, Any]]) -> ToolSet:
        if not available:
            return _NO_TOOLS
        if available is self._last[0]:  # the one list the dataset reader shares between lines (dataset.fast)
            return self._last[1]
        key = orjson.dumps(available)  # key order as written: a reordered copy only costs a rebuild
        tools = self._tool_sets.get(key)
        if tools is None:
            case_defs = {d.name: d for d in (definition_from(item) for item in available) if d is not None}
            described = frozenset(n for n, d in case_defs.items() if d.parameters is not None)
            exact = {n: k for n in described if (k := case_sensitive_keys(case_defs[n].parameters))}
            schemas = {n: at for n in described if (at := SchemaAt.of(case_defs[n].parameters)) is not None}
            tools = ToolSet(case_defs or None, exact or None, described, schemas or None)
            if len(self._tool_sets) >= self._max_tool_sets:
                self._tool_sets.clear()  # bounded: a dataset with ever-new tool lists just rebuilds them
            self._tool_sets[key] = tools
        self._last = (available, tools)  # held, so the list's identity cannot pass to another
        return tools
