"""Score one case: the agent's calls against the expected list and each acceptable alternative.

Per call, the engine scores the run line's calls exactly as the processor scores a trace's tool spans
(``engine.Scorer.score``: parse, known tool, schema, outcome, duplicate, repeated failure, must-not-call with
the case's own list added, every configured policy), one ``CallHistory`` per line. What needs ground truth is
added here, per reference list: ``checks.selection``, ``checks.argument_match`` and ``checks.order``. The case
is scored against the reference that fits best (a passing one wins at once), and it passes when, against that reference:

- the called names equal the expected names as a multiset (precision = recall = 1),
- every matched call passes all three argument layers (so it also parsed),
- for the ordered-dependency slice, the order is exact (parallel batches as sets),
- no must-not-call tool was called, no configured policy was broken, the run recorded no error, and the run
  has a line for the case.

Recovery after an error (``checks.recovery``, as online) is reported per case, not part of passing: after each
failed call (outcome not ``success``: a run line records no per-call errors, so this is a call the checks found
malformed, or every call of a line whose run recorded an ``error``), what the next call did; after the last call
the agent answered (the run file holds the whole run), so a failure nothing followed is ``handed_back``, unless
the run recorded an error (``carried_on``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from otel_toolcall_eval.checks.argument_match import (
    ABSENT,
    PASSED,
    ArgumentVerdict,
    closeness,
    identical,
    match_arguments,
)
from otel_toolcall_eval.checks.must_not_call import VIOLATION as MUST_NOT_CALL
from otel_toolcall_eval.checks.necessity import unnecessary_calls
from otel_toolcall_eval.checks.order import (
    EXACT,
    OrderScore,
    aligned_pairs,
    most_ordered,
    order_score,
    pair_order_score,
    turn_index,
)
from otel_toolcall_eval.checks.pairing import assign, optimal_assignments
from otel_toolcall_eval.checks.recovery import CallStep, Step, TurnStep, classify_recoveries
from otel_toolcall_eval.checks.selection import Selection, counts, true_positives
from otel_toolcall_eval.checks.trajectory import arguments_match, trajectory_match
from otel_toolcall_eval.dataset.models import ExpectedCall
from otel_toolcall_eval.engine import call_key
from otel_toolcall_eval.offline.policies import PolicyViolation, policy_reasons, policy_violations_of
from otel_toolcall_eval.offline.prepare import PreparedCase, Preparer, Reference, ToolSet, TrajectorySpec
from otel_toolcall_eval.offline.runs import RunCase
from otel_toolcall_eval.records import CallHistory, CallScore, Outcome, ParseStatus


@dataclass(slots=True)
class CaseResult:
    case: PreparedCase
    reference: int  # 0: expected_tool_calls; i >= 1: the i-th acceptable alternative
    expected: tuple[str, ...]
    actual: list[str]
    selection: Selection  # tool selection over multisets of names (checks.selection)
    expected_counts: dict[str, int]
    actual_counts: dict[str, int]
    pairs: int = 0  # expected calls matched to a call of the same tool
    args_correct: int = 0  # matched calls whose arguments passed every layer
    required_checked: int = 0  # matched calls that reached the required-argument layer
    required_ok: int = 0
    free_text_similarity: float | None = None  # the lowest over matched calls
    schema_checked: int = 0
    schema_invalid: int = 0
    order: OrderScore | None = None
    parse_failures: int = 0
    unknown_checked: int = 0
    unknown_tools: int = 0
    duplicate_calls: int = 0
    undeclared_arguments: int = 0  # calls with an argument their schema does not declare (checks.undeclared)
    # sequences default to () (no factory call per result); score_case sets them
    must_not_call_violations: Sequence[str] = ()
    policy_violations: Sequence[PolicyViolation] | None = None  # None: the config has no trajectory policies
    pair_verdicts: Sequence[tuple[str, ArgumentVerdict, int]] = ()  # (tool, verdict, index of the call)
    passed: bool = False
    checks: Sequence[CallScore] = ()  # the engine's per-call scores, kept for wording the reasons
    core_ok: bool = False  # matched its reference (before must-not-call, policies, errors and missing runs)
    _reasons: list[str] | None = None
    latency_ms: float | None = None
    tokens: float | None = None
    error: str | None = None
    missing_run: bool = False
    recovery: Sequence[str] = ()  # the recovery class of each failed call, in step order (checks.recovery)
    call_recovery: Sequence[str | None] = ()  # each call's class, in call order (None: it did not fail)
    trajectory_mode: str | None = None  # the case's trajectory match mode (checks.trajectory); None: not matched
    trajectory_match: bool | None = None  # the calls match a reference list under that mode

    @property
    def reasons(self) -> list[str]:
        """Why the case failed, most actionable first: worded only when asked (reports), not while scoring."""
        if self.passed:
            return []
        if self._reasons is None:
            self._reasons = _reasons(self, self.case, self.checks, self.core_ok)
        return self._reasons

    @property
    def id(self) -> str:
        return self.case.id

    @property
    def slice(self) -> str:
        return self.case.slice

    @property
    def difficulty(self) -> str:
        return self.case.difficulty

    @property
    def expected_no_tool(self) -> bool:
        return self.case.expected_no_tool

    @property
    def user_input(self) -> str:
        return self.case.user_input

    @property
    def tp(self) -> int:
        return self.selection.tp

    @property
    def precision(self) -> float:
        return self.selection.precision

    @property
    def recall(self) -> float:
        return self.selection.recall

    @property
    def f1(self) -> float:
        return self.selection.f1

    @property
    def schema_valid(self) -> bool | None:
        return None if not self.schema_checked else self.schema_invalid == 0

    @property
    def required_args_match(self) -> bool | None:
        return None if not self.required_checked else self.required_ok == self.required_checked

    @property
    def argument_accuracy(self) -> float | None:
        return self.args_correct / self.pairs if self.pairs else None

    @property
    def unnecessary_calls(self) -> int:
        return unnecessary_calls(len(self.actual), self.selection.tp)


def score_case(case: PreparedCase, run: RunCase | None, prep: Preparer) -> CaseResult:
    """Every per-case metric of one run of ``case`` (``run`` None: the run file has no line for it)."""
    checks: list[CallScore] = []
    names: list[str] = []
    by_name: dict[str, list[int]] = {}
    parse_failures = schema_checked = schema_invalid = unknown_checked = unknown = duplicates = undeclared = 0
    violations: list[str] = []
    errors = 0  # calls that did not succeed (the engine's count)
    if run is not None and run.calls:
        scorer = prep.scorer
        offered = case.tools.offered
        forbidden = case.forbidden
        history = CallHistory()
        turns = run.turns()
        for i, record in enumerate(run.calls):
            c = scorer.score(
                record, history, trace_tools=offered, batch=None if turns is None else turns[i], forbidden=forbidden
            )
            checks.append(c)
            name = c.name
            names.append(name)
            slot = by_name.get(name)
            if slot is None:
                by_name[name] = [i]
            else:
                slot.append(i)
            if c.parse_ok is False:
                parse_failures += 1
            if c.schema_valid is not None:
                schema_checked += 1
                schema_invalid += not c.schema_valid
            if c.tool_known is not None:
                unknown_checked += 1
                unknown += not c.tool_known
            duplicates += c.duplicate
            undeclared += bool(c.undeclared_arguments)
            if c.violations and MUST_NOT_CALL in c.violations:
                violations.append(name)
        errors = history.errors

    best: CaseResult | None = None
    best_key: tuple[float, float, float] | None = None
    for index, ref in enumerate(case.references):
        result, ok = _against(case, ref, index, checks, names, run.batches if run else None, by_name, prep)
        if ok:
            best, best_key = result, None
            break
        # best fit: F1, then calls with right arguments, then order; a tie keeps the earlier list
        key = (result.f1, float(result.args_correct), result.order.score if result.order is not None else 0.0)
        if best_key is None or key > best_key:
            best, best_key = result, key
    assert best is not None  # a case has at least its expected list
    result = best
    core_ok = best_key is None
    result.parse_failures = parse_failures
    result.schema_checked = schema_checked
    result.schema_invalid = schema_invalid
    result.unknown_checked = unknown_checked
    result.unknown_tools = unknown
    result.duplicate_calls = duplicates
    result.undeclared_arguments = undeclared
    result.must_not_call_violations = violations
    broken = None
    if prep.has_policies:
        broken = result.policy_violations = (
            policy_violations_of(checks, prep.policy.step_budget) if run is not None else []
        )
    if run is not None:
        result.latency_ms, result.tokens, result.error = run.latency_ms, run.tokens, run.error
    else:
        result.missing_run = True
    spec = case.trajectory
    if spec is not None:
        result.trajectory_mode = spec.mode
        # no run line: nothing was shown to match (a vacuous subset match would hide the missing run)
        result.trajectory_match = run is not None and _trajectory(case, spec, checks, names, run.batches, prep)
        if spec.decides:
            core_ok = result.trajectory_match
    result.passed = core_ok and not violations and not broken and result.error is None and run is not None
    result.checks = checks
    result.core_ok = core_ok
    if errors:  # the engine counted a call that did not succeed: classify what followed each
        assert run is not None
        repeated = [name for name, positions in by_name.items() if len(positions) > 1]
        decided = recoveries(checks, answered=run.error is None and run.answered is not False, repeated=repeated)
        result.recovery = [cls for _, cls in decided]
        by_step = dict(decided)
        result.call_recovery = [by_step.get(c.step) for c in checks]
    return result


_NO_ARGUMENTS: dict[str, Any] = {}  # read only: a call with no arguments recorded compares as an empty object


def _key(score: CallScore) -> str | None:
    """The call's normalised form; None (never "the same call") when its arguments were not recorded, or are a raw
    value nested too deeply to print."""
    if score.parse_status is ParseStatus.ABSENT:
        return None
    try:
        return call_key(score)
    except RecursionError:
        return None


def recoveries(
    checks: Sequence[CallScore], answered: bool, repeated: Collection[str] | None = None
) -> list[tuple[int, str]]:
    """The recovery class of each failed call of one run line, with its step, in step order (``answered``: the
    run ended with the agent's answer, a hand-back after the last call). ``repeated``: the tools called more
    than once, when the caller knows them; only their calls need a normalised form (a key is compared only
    between calls of one tool)."""
    steps: list[Step] = [
        CallStep(
            c.name,
            _key(c) if repeated is None or c.name in repeated else None,
            c.outcome is not Outcome.SUCCESS,
            c.step,
            c.batch,
        )
        for c in checks
    ]
    if answered:
        steps.append(TurnStep())
    return [(step.step, cls) for step, cls in classify_recoveries(steps)]


def _trajectory(
    case: PreparedCase,
    spec: TrajectorySpec,
    checks: list[CallScore],
    names: list[str],
    batches: list[int | None] | None,
    prep: Preparer,
) -> bool:
    """Do the calls match any reference list under the case's trajectory mode (checks.trajectory)?"""
    actual = [c.arguments if c.parse_ok is not False else None for c in checks]
    for ref in case.references:
        calls = ref.calls

        def same(i: int, j: int, calls: tuple[ExpectedCall, ...] = calls) -> bool:
            spec_call = calls[i]
            tool = spec_call.name
            got = actual[j]
            return arguments_match(
                spec.args_mode(tool),
                spec_call.args,
                got if got is not None or checks[j].parse_ok is False else {},
                prep.normalizer,
                options=spec_call.arg_options,
                optional=spec_call.optional_args,
                exact=spec_call.exact_args,
                exact_case=prep.exact_case(tool, case.tools) if prep.any_exact_case or case.tools.exact_case else (),
                schema=prep.schema(tool, case.tools),
            )

        if trajectory_match(spec.mode, ref.names, names, same, ref.batches, batches):
            return True
    return False


def _against(
    case: PreparedCase,
    ref: Reference,
    index: int,
    checks: list[CallScore],
    names: list[str],
    batches: list[int | None] | None,
    by_name: dict[str, list[int]],
    prep: Preparer,
) -> tuple[CaseResult, bool]:
    expected = ref.names
    n = len(expected)
    same = n == len(names) and len(by_name) == n and expected == tuple(names)  # right tools, in order, once each
    if same:
        made = ref.counts
        tp = n
    else:
        made = {name: len(positions) for name, positions in by_name.items()}
        tp = true_positives(ref.counts, made)
    result = CaseResult(case, index, expected, names, Selection(tp, n, len(names)), ref.counts, made)
    plain = ref.plain
    aligned: set[tuple[int, int]] | None = None  # second pass: an ordered alignment, kept where pairings tie
    cache: dict[tuple[int, int], ArgumentVerdict] | None = None  # (position, call) -> verdict, across passes
    while True:
        verdicts: list[tuple[str, ArgumentVerdict, int]] = []
        pairs = args_correct = required_checked = required_ok = 0
        lowest: float | None = None
        assigned: dict[int, tuple[int, ArgumentVerdict] | None] | None = None  # position -> (call, verdict)
        for position, spec in enumerate(ref.calls):
            candidates = None if same else by_name.get(spec.name)
            if same or (candidates is not None and len(candidates) == 1 and ref.counts[spec.name] == 1):
                # the pair is forced: the call in the same position, or the one call of the tool
                chosen = position if candidates is None else candidates[0]
                check = checks[chosen]
                chosen_verdict = None
                if plain[position] and check.parse_ok is not False and check.schema_valid is not False:
                    # ``match_arguments``' first test, without its call: identical values pass as they are
                    got = check.arguments
                    if got is None:
                        got = _NO_ARGUMENTS
                    for key, want in spec.args.items():
                        value = got.get(key, ABSENT)
                        if type(value) is not type(want) or value != want:
                            break
                        if (type(want) is dict or type(want) is list) and not identical(want, value):
                            break  # Python's == holds for {"a": True} and {"a": 1}
                    else:
                        chosen_verdict = PASSED
                if chosen_verdict is None:
                    chosen_verdict = _verdict(spec, check, prep, case.tools)
            elif not candidates:
                continue  # the tool was not called
            else:  # several calls or expected calls of the tool: an optimal assignment (checks.pairing)
                if assigned is None:
                    assigned = {}
                if position not in assigned:
                    if cache is None:
                        cache = {}
                    _assign(spec.name, ref, candidates, checks, prep, case.tools, assigned, aligned, cache)
                found = assigned[position]
                if found is None:
                    continue  # more expected than actual calls of the tool: this one is unmatched
                chosen, chosen_verdict = found
            pairs += 1
            failed = chosen_verdict.failed
            if failed is None:
                args_correct += 1
                required_checked += 1
                required_ok += 1
            elif failed != "parse" and failed != "schema":
                required_checked += 1
                required_ok += failed != "required"
            sim = chosen_verdict.similarity
            if sim is not None and (lowest is None or sim < lowest):
                lowest = sim
            verdicts.append((spec.name, chosen_verdict, chosen))
        if not n or same:
            if n:
                result.order = EXACT
            break
        by_names = order_score(expected, names, ref.batches, batches)  # k = the LCS of the names
        if assigned is None:  # each tool paired at most once: the pairs are forced, k is the LCS of the names
            result.order = by_names
            break
        paired = _pairs(ref, by_name, assigned)
        result.order = pair_order_score(paired, expected, names, ref.batches, batches)
        if result.order.score >= by_names.score or aligned is not None:
            break
        # k below the names' LCS: a tie may have been settled against order; pair again, keeping the maximum
        # matching whose ordered subsequence is longest (the definition), else one alignment of the names
        assert cache is not None
        goal = round(by_names.score * (n + len(names)) / 2)
        best = _most_ordered(ref, by_name, assigned, paired, checks, prep, case.tools, cache, batches, goal)
        if best is not None:
            if best[0] <= round(result.order.score * (n + len(names)) / 2):
                break  # no maximum matching is more in order than the one taken
            aligned = set(best[1])
            continue
        aligned = aligned_pairs(expected, names, ref.batches, batches)
        if not _could_tie(aligned, verdicts, paired, assigned, ref, checks, prep, case.tools, cache):
            break
    result.pair_verdicts = verdicts
    result.pairs = pairs
    result.args_correct = args_correct
    result.required_checked = required_checked
    result.required_ok = required_ok
    result.free_text_similarity = lowest
    ok = args_correct == pairs and tp == n and len(names) == n
    if ok and case.ordered and result.order is not None and not result.order.exact:
        ok = False
    return result, ok


def _pairs(
    ref: Reference, by_name: dict[str, list[int]], assigned: dict[int, tuple[int, ArgumentVerdict] | None]
) -> list[tuple[int, int]]:
    """(expected position, call) of every pair: the assigned ones, and the forced ones (one call each side)."""
    out = []
    for position, spec in enumerate(ref.calls):
        if position in assigned:
            found = assigned[position]
            if found is not None:
                out.append((position, found[0]))
        else:
            candidates = by_name.get(spec.name)
            if candidates:
                out.append((position, candidates[0]))
    return out


def _most_ordered(
    ref: Reference,
    by_name: dict[str, list[int]],
    assigned: dict[int, tuple[int, ArgumentVerdict] | None],
    paired: list[tuple[int, int]],
    checks: list[CallScore],
    prep: Preparer,
    tools: ToolSet,
    cache: dict[tuple[int, int], ArgumentVerdict],
    batches: list[int | None] | None,
    goal: int,
) -> tuple[int, list[tuple[int, int]]] | None:
    """(k, pairs of the assigned tools) of the maximum matching with the longest ordered subsequence
    (``checks.order.most_ordered``); None when its tools have too many matchings to try (7 calls of one tool
    each side, or 5,000 combinations), where the caller keeps an alignment of the names instead."""
    rows_of: dict[str, list[int]] = {}
    for p in assigned:
        rows_of.setdefault(ref.calls[p].name, []).append(p)
    fixed = [(p, j) for p, j in paired if p not in assigned]

    def weight(p: int, j: int) -> tuple[bool, float]:
        v = cache.get((p, j))
        if v is None:
            v = cache[p, j] = _verdict(ref.calls[p], checks[j], prep, tools)
        return closeness(v)

    choices = []
    for tool, rows in rows_of.items():
        options = optimal_assignments(rows, by_name[tool], weight, limit=720)
        if options is None:
            return None
        choices.append(options)
    e_turn = turn_index(len(ref.calls), ref.batches)
    a_turn = turn_index(len(checks), batches)
    return most_ordered(fixed, choices, e_turn, a_turn, goal, budget=5000)


def _could_tie(
    aligned: set[tuple[int, int]],
    verdicts: list[tuple[str, ArgumentVerdict, int]],
    paired: list[tuple[int, int]],
    assigned: dict[int, tuple[int, ArgumentVerdict] | None],
    ref: Reference,
    checks: list[CallScore],
    prep: Preparer,
    tools: ToolSet,
    cache: dict[tuple[int, int], ArgumentVerdict],
) -> bool:
    """Can an aligned pair the assignment left out be in another optimal assignment? Not when its tool's pairs
    all passed and it fails: an optimal assignment then passes every pair. (Calls made in the wrong order with
    their own arguments, the usual way k falls below the LCS, need no second pass.)"""
    chosen = set(paired)
    failing_tools = {tool for tool, v, _ in verdicts if v.failed is not None}
    for p, j in aligned:
        if p not in assigned or (p, j) in chosen:
            continue  # a forced pair, or already kept
        tool = ref.calls[p].name
        if tool in failing_tools:
            return True
        v = cache.get((p, j))
        if v is None:
            v = cache[p, j] = _verdict(ref.calls[p], checks[j], prep, tools)
        if v.failed is None:
            return True
    return False


def _assign(
    tool: str,
    ref: Reference,
    candidates: list[int],
    checks: list[CallScore],
    prep: Preparer,
    tools: ToolSet,
    out: dict[int, tuple[int, ArgumentVerdict] | None],
    aligned: set[tuple[int, int]] | None,
    cache: dict[tuple[int, int], ArgumentVerdict],
) -> None:
    """Pair every expected call of ``tool`` with the calls of it, optimally (ties: towards the ordered alignment
    ``aligned``, so order is kept where the arguments allow); None for one left unpaired."""
    rows = [p for p, c in enumerate(ref.calls) if c.name == tool]
    row_of = {p: i for i, p in enumerate(rows)}
    prefer = [(row_of[p], j) for p, j in aligned if p in row_of] if aligned else ()

    def judge(i: int, j: int) -> ArgumentVerdict:
        v = cache.get((rows[i], j))
        if v is None:
            v = cache[rows[i], j] = _verdict(ref.calls[rows[i]], checks[j], prep, tools)
        return v

    pairs = assign(len(rows), candidates, judge, closeness, prefer)
    for i, j, verdict in pairs:
        out[rows[i]] = (j, verdict)
    for p in rows:
        out.setdefault(p, None)


def _verdict(spec: ExpectedCall, check: CallScore, prep: Preparer, tools: ToolSet) -> ArgumentVerdict:
    args = spec.args
    required_only = spec.required_args_only
    quantities, text_rules = prep.rules(spec.name) if prep.any_rules else (None, None)
    return match_arguments(
        args,
        check.arguments,
        prep.normalizer,
        parse_ok=check.parse_ok,
        schema_valid=check.schema_valid,
        required_only=required_only,
        free_text=prep.free_fields(spec.name),
        similarity=prep.similarity,
        threshold=prep.threshold,
        exact_case=prep.exact_case(spec.name, tools) if prep.any_exact_case or tools.exact_case else (),
        options=spec.arg_options,
        optional=spec.optional_args,
        quantities=quantities,
        text_rules=text_rules,
        exact=spec.exact_args,
        schema=prep.schema(spec.name, tools),
    )


def _reasons(result: CaseResult, case: PreparedCase, checks: Sequence[CallScore], core_ok: bool) -> list[str]:
    """Why the case failed, most actionable first; computed only for failing cases."""
    out: list[str] = []
    if result.missing_run:
        return ["no line for this case in the run file"]
    if result.error is not None:
        out.append(f"run error: {result.error[:200]}")
    out += [f"must-not-call: {name}" for name in dict.fromkeys(result.must_not_call_violations)]
    if result.policy_violations:
        out += policy_reasons(result.policy_violations, run_failed=result.error is not None)
    if core_ok:
        return out
    spec = case.trajectory
    if spec is not None and spec.decides:
        out.append(f"trajectory ({spec.mode}) does not match")
    ref = case.references[result.reference]
    expected, actual = counts(ref.names), counts(result.actual)
    for name, n in expected.items():
        if n > actual.get(name, 0):
            out.append(f"missing {name}" + (f" (x{n - actual.get(name, 0)})" if n - actual.get(name, 0) > 1 else ""))
    for name, n in actual.items():
        if n > expected.get(name, 0):
            extra = n - expected.get(name, 0)
            out.append(f"unexpected {name}" + (f" (x{extra})" if extra > 1 else ""))
    out += _argument_reasons(checks, result)
    exact_names = result.tp == len(ref.names) == len(result.actual)
    if case.ordered and result.order is not None and not result.order.exact and exact_names:
        out.append(f"order: expected {' > '.join(ref.names)}; got {' > '.join(result.actual)}")
    if not out:
        out.append("did not match")
    return out


def _argument_reasons(checks: Sequence[CallScore], result: CaseResult) -> list[str]:
    out = []
    for tool, verdict, j in result.pair_verdicts:
        if verdict.failed == "parse":
            out.append(f"{tool} arguments did not parse")
        elif verdict.failed == "schema":
            errors = checks[j].schema_errors
            out.append(f"{tool} arguments fail the schema ({errors[0] if errors else 'invalid'})")
        elif verdict.failed == "required":
            out.append(f"{tool} arguments differ: {', '.join(verdict.mismatched)}")
        elif verdict.failed == "free_text":
            out.append(f"{tool} free text too far off: {', '.join(verdict.mismatched)} ({verdict.similarity:.2f})")
    return out
