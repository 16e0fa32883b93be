"""What the processor scores for each agent framework it is tested against, in each of the framework's modes.

One row per framework, each backed by a real integration test (named in ``test``) and by the spans that test
recorded (``tests/fixtures/frameworks/``, replayed by the unit suite). The framework table of docs/frameworks.md is
generated from this tuple, so a claim here is a claim the tests check; the settings are what a user changes to get
the missing evidence recorded.
"""

from __future__ import annotations

from dataclasses import dataclass

from otel_toolcall_eval.conventions.shapes import GENAI_SWITCH, shape_named


@dataclass(frozen=True, slots=True)
class FrameworkSupport:
    name: str
    instrumentation: str
    default: str  # what is scored in the framework's default mode
    setting: str  # how to switch to the other mode (environment variable or SDK option)
    other: str  # what is scored in that mode
    test: str
    # the instrumentation scopes its spans carry (how ``doctor`` tells the framework of a span); each has its row in
    # the shape table (``shapes.py``), which says what to set when its traces lack arguments, results or definitions
    scopes: tuple[str, ...] = ()

    @property
    def capture(self) -> str:
        """The content switch of this framework's first scope, from the shape table."""
        for scope in self.scopes:
            shape = shape_named(scope)
            if shape is not None and shape.content_switch:
                return shape.content_switch
        return ""


OUTCOMES_ONLY = "outcomes only: no parse or schema verdict (no arguments recorded), no unknown-tool evidence"
# a call that ran no tool span, whose reply the next request carries back for its call id
SCORED_FROM_REQUESTS = "scored from the requests (the next request's reply answers its call id)"
# a call of a tool the agent lacks whose request no reply answers: on the root only, no call of the verdict
UNKNOWN_COUNTED_ONLY = (
    "counted only in `trace.unknown_tool_requests` (it fails `trace.correct` but is none of the trace's tool calls)"
)

FRAMEWORKS: tuple[FrameworkSupport, ...] = (
    FrameworkSupport(
        "LlamaIndex 0.14 `FunctionAgent`",
        "openinference-instrumentation-llama-index 4.6",
        'everything but `tool_known` (its `llm.tools` holds object reprs): arguments unwrapped from `{"kwargs"}`, '
        "schema from the tool span's `tool.parameters`; the unknown tool (no span) "
        f'{SCORED_FROM_REQUESTS}: "Tool X not found"',
        "`TraceConfig(hide_inputs=True, hide_outputs=True)` or `OPENINFERENCE_HIDE_INPUTS` / `_OUTPUTS=true`",
        f"{OUTCOMES_ONLY}; LlamaIndex runs schema-invalid arguments unchecked",
        "test_agent_frameworks.py::test_llama_index_function_agent",
        ("openinference.instrumentation.llama_index",),
    ),
    FrameworkSupport(
        "smolagents 1.26 `ToolCallingAgent`",
        "openinference-instrumentation-smolagents 0.1.43",
        'everything: arguments unwrapped from `{"args", "kwargs", ...}`, schemas and tool list from the LLM '
        "span's `llm.tools` (the tool span's `tool.parameters` is not a JSON Schema); `final_answer` is a call; the "
        "unknown tool (no span; its step span fails, and its reply is a tool message without a call id) "
        f"{UNKNOWN_COUNTED_ONLY}",
        "`TraceConfig(hide_inputs=True, hide_outputs=True)` or `OPENINFERENCE_HIDE_INPUTS` / `_OUTPUTS=true`",
        OUTCOMES_ONLY,
        "test_agent_frameworks.py::test_smolagents_tool_calling_agent",
        ("openinference.instrumentation.smolagents",),
    ),
    FrameworkSupport(
        "OpenAI Agents SDK 0.24 (Responses API)",
        "openinference-instrumentation-openai-agents 2.6",
        "everything: schemas and tool list from the response spans; the unknown tool (the SDK ends the run, "
        f"`ModelBehaviorError`, on no span, so no reply answers it) {UNKNOWN_COUNTED_ONLY}",
        "`TraceConfig(hide_inputs=True, hide_outputs=True)` or `OPENINFERENCE_HIDE_INPUTS` / `_OUTPUTS=true`",
        f"{OUTCOMES_ONLY}; the SDK's own rejection of invalid arguments is redacted, so it counts as an execution "
        "failure",
        "test_agent_frameworks.py::test_openai_agents_sdk",
        ("openinference.instrumentation.openai_agents",),
    ),
    FrameworkSupport(
        "Strands Agents 1.62",
        "native (GenAI conventions)",
        "everything: arguments and results from the span events `gen_ai.tool.message` / `gen_ai.choice`, schema "
        'from `gen_ai.tool.json_schema`, its own rejection ("Validation failed for input parameters") as '
        'malformed, "Unknown tool: X" as an unknown tool; the tool names arrive on the root span after the '
        "tool spans (`trace.unlisted_calls`)",
        "`OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental,gen_ai_tool_definitions`",
        "the same verdicts, from `gen_ai.tool.call.arguments` / `.result`; definitions "
        "(`inputSchema.json`) on the root span",
        "test_agent_frameworks_strands.py::test_strands_agent (own extra: `make test-strands`)",
        ("strands.telemetry.tracer",),
    ),
    FrameworkSupport(
        "AutoGen 0.7.5 `AssistantAgent`",
        "native tool spans + opentelemetry-instrumentation-openai-v2 2.4b0 on the model client",
        "outcomes (it records no arguments, results or definitions); its own `ValidationError` as a rejected "
        "input; its agent-creation trace gets no verdict; an unknown tool (no span) goes unseen",
        "`OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental` + "
        "`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY`",
        "also parse verdicts, from the arguments the chat spans' `gen_ai.output.messages` requested (same call "
        'id), and the unknown tool from the "not found in any workbench" reply; no schema is recorded anywhere',
        "test_agent_frameworks_autogen.py::test_autogen_assistant_agent (own extra: `make test-autogen`)",
        ("autogen-core",),
    ),
    FrameworkSupport(
        "OpenAI client, a hand-written tool loop",
        "opentelemetry-instrumentation-openai-v2 2.4b0 + util-genai 1.1b0 tool spans (`TelemetryHandler.tool`)",
        "outcomes; an unknown tool from the loop's own error on its tool span; 2.4b0 records no request tools, so "
        "no schema or tool-list verdict (the loop runs the bad enum unchecked)",
        GENAI_SWITCH,
        "also parse verdicts, from `gen_ai.tool.call.arguments` on the tool spans; schemas only from `tools:` in "
        "the config",
        "test_agent_frameworks_openai_v2.py::test_openai_v2_tool_calling_loop (in `make test-autogen`'s environment)",
        ("opentelemetry.util.genai.handler",),
    ),
    FrameworkSupport(
        "Google ADK 2.13 `LlmAgent`",
        "native (GenAI conventions)",
        "outcomes, `tool_known` from the definitions on every `generate_content` span (their `parameters` are "
        'null), the unknown tool\'s own span ("no tool with that name"); no arguments, so no parse or schema '
        "verdict; ADK runs the bad enum unchecked",
        "`OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental` + "
        "`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY`; or the legacy "
        "`ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1`",
        "everything; legacy: from `gcp.vertex.agent.tool_call_args` / `tool_response` and the definitions in "
        "`call_llm`'s `llm_request` JSON, which end after their turn's tool span (the first call's `tool_known` "
        "stays absent, `trace.unlisted_calls` checks it)",
        "test_agent_frameworks_adk.py::test_adk_llm_agent (own extra: `make test-adk`)",
        ("gcp.vertex.agent",),
    ),
    FrameworkSupport(
        "CrewAI 1.15 `Crew`",
        "openinference-instrumentation-crewai 1.1 (+ openinference-instrumentation-openai on its LLM)",
        "everything: schemas and tool list from the chat spans; the unknown tool (no tool span) "
        f'{SCORED_FROM_REQUESTS}: "not found"',
        "`CrewAIInstrumentor().instrument(use_event_listener=True)`",
        'parse verdicts, tool names, its own rejection ("arguments validation failed") as malformed, the unknown '
        'tool\'s span (marked OK, "not found"); no schema verdict: its `llm.tools` parameters are Python reprs; the '
        "chat spans become roots of their own traces, which get no verdict",
        "test_agent_frameworks_crewai.py::test_crewai_crew (own extra: `make test-crewai`)",
        ("openinference.instrumentation.crewai._event_listener", "openinference.instrumentation.crewai"),
    ),
    FrameworkSupport(
        "pydantic-ai 2.68",
        "native (`InstrumentationSettings`, current format and `version=2`)",
        "everything, incl. requests of tools it does not have (it runs no tool span for them) and `ModelRetry` "
        "as a rejected input",
        "`InstrumentationSettings(include_content=False)`",
        OUTCOMES_ONLY.replace(", no unknown-tool evidence", ""),
        "test_frameworks.py::test_pydantic_ai_*",
    ),
    FrameworkSupport(
        "LangGraph 1.2 `create_react_agent`",
        "openinference-instrumentation-langchain 0.1.80",
        "everything; single-argument tools record a bare value, mapped onto the only parameter; no call ids, so "
        "batches are matched by name",
        "-",
        "-",
        "test_frameworks.py::test_langgraph_*",
        ("openinference.instrumentation.langchain",),
    ),
    FrameworkSupport(
        "LangGraph 1.2 `create_react_agent` + `ToolNode`",
        "opentelemetry-instrumentation-langchain 0.62 (OpenLLMetry)",
        'everything: arguments unwrapped from its own `{"input_str", "inputs", "kwargs"}` wrapper under '
        "`gen_ai.tool.call.arguments` (the call id from it), definitions and requests on the chat spans, the bad "
        "enum's pydantic rejection inside the tool span, the unknown tool (no span) as a request of a tool not "
        "offered",
        "`TRACELOOP_TRACE_CONTENT=false`",
        "outcomes and `tool_known` (the definitions stay); no parse or schema verdict; the bad enum as a rejected "
        "input; the unknown tool unseen (no requests recorded)",
        "test_agent_frameworks_pairs.py::test_langgraph_openllmetry (own extra: `make test-pairs`)",
        ("opentelemetry.instrumentation.langchain",),
    ),
    FrameworkSupport(
        "DSPy 3.4 `ReAct`",
        "openinference-instrumentation-dspy 0.1.48",
        "parse verdicts and outcomes: the tool name from the span name (`get_weather.__call__`), arguments from "
        '`{"kwargs"}`, DSPy\'s own rejection ("Arg unit is invalid") as malformed; `finish` is a call; no schema or '
        "tool-list verdict (ReAct offers its tools in prompt text, no definitions); its model cannot request a tool "
        "it was not offered",
        "`TraceConfig(hide_inputs=True, hide_outputs=True)` or `OPENINFERENCE_HIDE_INPUTS` / `_OUTPUTS=true`",
        "outcomes only (the rejection's message is kept)",
        "test_agent_frameworks_pairs.py::test_dspy_react_openinference (own extra: `make test-pairs`)",
        ("openinference.instrumentation.dspy",),
    ),
    FrameworkSupport(
        "Anthropic SDK 2.10 `beta.messages.tool_runner`",
        "the SDK's own tracing (`open_telemetry` client option)",
        "outcomes only: `execute_tool` spans with call ids but no arguments, results or error text (a rejected input "
        "and a raising tool are both `tool_error` failures); no definitions anywhere",
        "`ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE=content`",
        "parse verdicts, the SDK's rejection of the bad enum from the result's content blocks (\"Invalid arguments "
        'for function ...") as malformed, the unknown tool (no span) from the "not found" reply; no schema or '
        "tool-list verdict (no definitions recorded); with OpenLLMetry's instrumentation on the same client too, "
        "everything, each request counted once though two spans record it (one `gen_ai.response.id`)",
        "test_agent_frameworks_pairs.py::test_anthropic_tool_runner_own_spans (own extra: `make test-pairs`)",
        ("com.anthropic.sdk.python",),
    ),
    FrameworkSupport(
        "Anthropic SDK 2.10 `beta.messages.tool_runner`, model calls instrumented only",
        "openinference-instrumentation-anthropic 3.1; opentelemetry-instrumentation-anthropic 0.62 (OpenLLMetry)",
        "each requested call scored from the requests alone (the tools run on no span): `toolcall_eval.requested.N.*` "
        "on the model span whose input carried its result back: tool name against the definitions, arguments "
        "against the schema, the outcome from the `tool_result` (OpenInference keeps its `is_error`; OpenLLMetry's "
        "GenAI parts drop it, so the reply's text says it: the tool runner's `repr` of the exception); the raising "
        "tool fails either way; counted in the root's "
        "verdict (`trace.request_scored_calls`); no latency; `doctor` says the tools run on no span",
        "`OPENINFERENCE_HIDE_INPUTS` / `_OUTPUTS=true`; `TRACELOOP_TRACE_CONTENT=false`",
        "nothing: no requests recorded, no verdict",
        "test_agent_frameworks_pairs.py::test_anthropic_tool_runner_openinference (and `_openllmetry`; own extra: "
        "`make test-pairs`)",
        ("openinference.instrumentation.anthropic", "opentelemetry.instrumentation.anthropic"),
    ),
    FrameworkSupport(
        "google-genai 2.34 automatic function calling",
        "opentelemetry-instrumentation-google-genai 1.3b0",
        "outcomes; no arguments; the definitions (names only, `parameters` null) only with content capture",
        GENAI_SWITCH,
        "also parse verdicts and the tool list, checked on the root (`trace.unlisted_calls`: the one "
        "`generate_content` span of the loop ends after its tool spans); no schema anywhere; google-genai cannot "
        "convert a `Literal` argument and raises on a tool it does not have, before any span",
        "test_agent_frameworks_pairs.py::test_google_genai_official_instrumentation (own extra: `make test-pairs`)",
        ("opentelemetry.instrumentation.google_genai",),
    ),
    FrameworkSupport(
        "Agno 3.1 `Agent`",
        "openinference-instrumentation-agno 1.0.15",
        "everything: schemas and tool list from the LLM spans, Agno's own pydantic rejection of the bad enum as "
        "malformed, the unknown tool (no span) as a request of a tool not offered; `tool.parameters` (the arguments "
        "again) is not read as a schema",
        "`OPENINFERENCE_HIDE_INPUTS` / `_OUTPUTS=true`",
        "outcomes, the rejection from its status text; no parse verdict: the arguments Agno still writes to "
        "`tool.parameters` are not read (the user asked to hide inputs); the unknown tool unseen",
        "test_agent_frameworks_pairs.py::test_agno_openinference (own extra: `make test-pairs`)",
        ("openinference.instrumentation.agno",),
    ),
    FrameworkSupport(
        "MCP 1.30 `ClientSession` (a tool loop on the OpenAI client)",
        "opentelemetry-instrumentation-mcp 0.62 (OpenLLMetry)",
        'parse verdicts and outcomes: arguments and results unwrapped from its `{"tool_name", "arguments"}` / '
        '`{"result", "is_error"}`; the server\'s pydantic rejection as malformed, "Unknown tool: X" as an unknown '
        "tool; no schema or tool-list verdict (the definitions are only in the `tools/list` span's output)",
        "`TRACELOOP_TRACE_CONTENT=false`",
        "outcomes only, and every failure an execution failure: the error texts are content (the trace reads "
        "correct though a call was rejected)",
        "test_agent_frameworks_pairs.py::test_mcp1_openllmetry (own extra: `make test-pairs`)",
        ("opentelemetry.instrumentation.mcp.instrumentation",),
    ),
    FrameworkSupport(
        "MCP Python SDK 2.3 `MCPServer` + `Client` (a tool loop on the OpenAI client)",
        "the SDK's own spans (server `tools/call <tool>`); openinference-instrumentation-openai 0.1.66 on the model "
        "client",
        "everything: each server span borrows the arguments of the one waiting request of its tool's name (the "
        "model's, on the ChatCompletion span: the span's id is a JSON-RPC id); schemas and tool list from the same "
        "spans; the server's rejection of the bad enum and the unknown tool (`tool_error`) explained by the schema "
        "and the definitions. A server in its own process (stdio) leaves only the client's `MCP send tools/call "
        "<tool>` spans in the agent's trace: the same verdicts; an `isError` result is no error there, so a span "
        "that reads as a success waits (held, `limits.max_hold_seconds`) for the reply the model's next request "
        "carries back for the call, which gives the span its outcome (the raising tool: `execution_failed`, "
        "`late_outcome.read`), its metrics, violations, judge and sessions; the root counts it too "
        "(`trace.late_outcome.*`). Not scored: a reply a bound released the span before (it goes out a success, "
        "counted in `toolcall_eval.late_outcome.unread`; the root still counts it)",
        "`OPENINFERENCE_HIDE_INPUTS` / `_OUTPUTS=true` on the model client (the MCP SDK has no content setting)",
        "outcomes only, and every failure an execution failure (`tool_error`): the trace reads correct though a "
        "call was rejected",
        "test_agent_frameworks_mcp2.py::test_mcp2_server_spans (and `test_mcp2_stdio_client_spans`)",
        ("mcp-python-sdk",),
    ),
    FrameworkSupport(
        "Semantic Kernel 1.45 `ChatCompletionAgent` with a plugin",
        "its own GenAI diagnostics (`SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS=true`)",
        "outcomes (`execute_tool` spans with call ids, no arguments); SK's own parse of an argument into its "
        "parameter's type as a rejection (`input_rejected`); the tool list from the root `invoke_agent` span, which "
        "ends after the tool spans (`trace.unlisted_calls`); the unknown tool unseen (no span; SK writes its request "
        "and the reply only as log records, never on spans, in every mode and without an agent too). "
        "With diagnostics off (SK's default) its `execute_tool` spans are written all the same, under an "
        "`AutoFunctionInvocationLoop` root: the same outcomes, no model calls, the tool list by name from that "
        "span's `sk.available_functions`, also all a `Kernel` without an agent (automatic function calling) offers "
        "(no schemas)",
        "`SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true`",
        "also parse verdicts; the schemas arrive with the root, after every tool span: the recorded arguments are "
        "validated then and the root carries the verdicts (`trace.late_schema.*`; the bad enum, which SK rejected "
        "itself, is invalid there too; an invalid call fails `trace.correct`)",
        "test_agent_frameworks_pairs.py::test_semantic_kernel_agent (own extra: `make test-pairs`)",
        ("semantic_kernel.functions.kernel_function",),
    ),
    FrameworkSupport(
        "Haystack 3.4 `Agent`",
        "openinference-instrumentation-haystack 0.1.46",
        "each requested call scored from the requests (the Agent runs its tools on no span): "
        "`toolcall_eval.requested.N.*` on the model span whose input answered it, matched by position within each "
        "`Agent.run` (no call ids anywhere; two agents in one trace count apart; a call waiting where a compacted "
        "history breaks the count is counted unmatched, `trace.unmatched_requests`, not scored); schemas and the "
        "tool list from the `Tool(...)` reprs in `input.value` (read bounded, never evaluated), outcomes from each "
        "reply's `ToolCallResult(error=)` repr: the bad enum, the unknown tool and the raising tool each fail the "
        "verdict; `doctor` says the tools are not instrumented",
        "`OPENINFERENCE_HIDE_INPUTS` / `_OUTPUTS=true`",
        "nothing of the calls: no verdict",
        "test_agent_frameworks_pairs.py::test_haystack_* (own extra: `make test-pairs`)",
        ("openinference.instrumentation.haystack",),
    ),
    FrameworkSupport(
        "Vercel AI SDK 7 `generateText` (Node, through `serve`)",
        "@ai-sdk/otel 1.0 `OpenTelemetry` (GenAI conventions)",
        "everything: `execute_tool` spans with arguments and results, definitions on the `chat` spans; the unknown "
        f"tool (no span) {SCORED_FROM_REQUESTS}; the bad enum runs unchecked (a JSON Schema tool)",
        "`registerTelemetry(new LegacyOpenTelemetry())`",
        "the same from the `ai.toolCall` spans (convention `vercel_ai`), definitions (`ai.prompt.tools`) and "
        "requests (`ai.response.toolCalls`) from `ai.generateText.doGenerate`, which ends after its tool span: "
        "the first call's `tool_known` stays absent (`trace.unlisted_calls` checks it)",
        "test_serve_node.py::test_vercel_ai_sdk_agent_is_scored_by_the_service (Node; `make node-deps`)",
    ),
    FrameworkSupport(
        "LangGraph.js 1.7 `StateGraph` + `ToolNode` (Node, through `serve`)",
        "@arizeai/openinference-instrumentation-langchain 4.1 (`manuallyInstrument` under ESM)",
        "everything: schemas and tool list from the LLM spans' `llm.tools`; LangChain.js rejects the bad enum "
        "before any tool span and runs none for the unknown tool: both are scored from the requests, each matched "
        "to its reply by position (its spans record no call ids)",
        "`OPENINFERENCE_HIDE_INPUTS` / `_OUTPUTS=true`, read only when a `traceConfig` object (`{}`) is passed",
        OUTCOMES_ONLY,
        "test_serve_node.py::test_langgraph_js_agent_is_scored_by_the_service (Node; `make node-deps`)",
        ("@arizeai/openinference-instrumentation-langchain",),
    ),
    FrameworkSupport(
        "OpenAI Agents SDK for JS 0.20 `Agent` + `Runner` (Node, through `serve`)",
        "@arizeai/openinference-instrumentation-openai-agents 0.2 (`manuallyInstrument` under ESM)",
        "everything: schemas and tool list from the response spans' `llm.tools`; the SDK only JSON-parses a JSON "
        "Schema tool's arguments, so the bad enum runs and the schema check flags it; the unknown tool (no span, "
        f"with `toolNotFoundBehavior: 'return_error_to_model'`) {SCORED_FROM_REQUESTS}; with the SDK's "
        "default (`ModelBehaviorError`) this instrumentation never ends its root span: no trace verdict",
        "`OPENINFERENCE_HIDE_INPUTS` / `_OUTPUTS=true`, read only when a `traceConfig` object (`{}`) is passed",
        OUTCOMES_ONLY,
        "test_serve_node.py::test_openai_agents_js_agent_is_scored_by_the_service (Node; `make node-deps`)",
        ("@arizeai/openinference-instrumentation-openai-agents",),
    ),
    FrameworkSupport(
        "LiteLLM 1.110 `completion` in a hand-written tool loop, the application's own `execute_tool` spans",
        'LiteLLM\'s OTel callback (`litellm.callbacks = ["otel"]`)',
        "the root's verdict though LiteLLM writes each request's chat attributes onto it (the span current at the "
        "call): every call from the application's tool spans, the unknown tool from its own error; one model call "
        "and its tokens (the last request logged overwrites the others); no schema or `tool_known` per call: the "
        "definitions come with the root, after every tool span, which validates the calls then "
        "(`trace.late_schema.*`: the bad enum)",
        "`USE_OTEL_LITELLM_REQUEST_SPAN=true`; or `litellm.turn_off_message_logging = True` (content is on by default)",
        "request spans: every verdict (schemas and tool list from each `litellm_request` span), every model call "
        "and its tokens once; content off: the same as by default less the root's schema check (no tools recorded)",
        "test_agent_frameworks_pairs.py::test_litellm_otel_callback (own extra: `make test-pairs`)",
        ("litellm",),
    ),
    FrameworkSupport(
        "BeeAI 0.1.85 `RequirementAgent`",
        "openinference-instrumentation-beeai 0.1.30",
        'everything: arguments unwrapped from its `{"input", "options"}` start event, schemas and tool list from the '
        "LLM spans, BeeAI's own rejection of the bad enum as malformed; the nameless `error` span it adds under a "
        "failed tool span is that call's event, not a call; `final_answer` is a call; the unknown tool unseen (its "
        "chat model rejects the request and asks again inside one model run: one span for two requests)",
        "`OPENINFERENCE_HIDE_INPUTS` / `_OUTPUTS=true`",
        "outcomes, the rejection from its exception (`ToolInputValidationError`); no parse, schema or tool-list "
        "verdict",
        "test_agent_frameworks_pairs.py::test_beeai_openinference (own extra: `make test-pairs`)",
        ("openinference.instrumentation.beeai",),
    ),
    FrameworkSupport(
        "pydantic-ai 2.68 through Logfire 5.4",
        "`logfire.instrument_pydantic_ai()` (pydantic-ai's own GenAI spans on Logfire's provider)",
        "everything, as pydantic-ai's native spans: requests of tools it does not have, its validation retry of the "
        "bad enum as malformed; the run ends on the raising tool",
        "`logfire.instrument_pydantic_ai(include_content=False)`",
        "outcomes, `tool_known` and the unknown tool (names stay recorded), the bad enum's retry as malformed; no "
        "parse or schema verdict",
        "test_agent_frameworks_pairs.py::test_pydantic_ai_logfire (own extra: `make test-pairs`)",
        ("pydantic-ai",),
    ),
    FrameworkSupport(
        "FastMCP 4 client and server",
        "MCP SDK / FastMCP spans (MCP conventions)",
        "everything, once per call though three nested spans record it",
        "-",
        "-",
        "test_mcp.py",
    ),
)
