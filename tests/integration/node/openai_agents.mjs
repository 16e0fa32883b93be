// A real OpenAI Agents SDK for JS agent (@openai/agents: an Agent with two function tools, run by its Runner on the
// SDK's default model, the Responses API) running the shared scenario (tests/framework_scenario.py) against the
// local fake of the OpenAI API, traced by OpenInference's instrumentation (@arizeai/openinference-instrumentation-
// openai-agents: a TracingProcessor of the SDK that turns its trace and spans into OpenTelemetry spans of the
// OpenInference convention) and exported over OTLP/HTTP (protobuf) to the scoring service.
// Unchanged but for its endpoints: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and OPENAI_BASE_URL, both on 127.0.0.1.
// Nothing goes to OpenAI's trace ingest: the instrumentation replaces the SDK's processors with its own
// (exclusiveProcessor, its default), and no OPENAI_API_KEY is set (that exporter skips without one).
import * as agents from '@openai/agents';
import { OpenAIAgentsInstrumentation } from '@arizeai/openinference-instrumentation-openai-agents';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';

const { Agent, ModelBehaviorError, OpenAIProvider, Runner, tool } = agents;

const endpoint = process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
const baseURL = process.env.OPENAI_BASE_URL;
if (!endpoint?.startsWith('http://127.0.0.1:') || !baseURL?.startsWith('http://127.0.0.1:')) {
  throw new Error('both endpoints must be on 127.0.0.1');
}

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'openai-agents-js' }),
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: endpoint }), { scheduledDelayMillis: 50 })],
});
provider.register();
// ESM: no require hook sees @openai/agents, so its namespace is handed over; traceConfig {}: the
// OPENINFERENCE_HIDE_* variables apply (without a config object the environment is not read).
const instrumentation = new OpenAIAgentsInstrumentation({ tracerProvider: provider, traceConfig: {} });
instrumentation.manuallyInstrument(agents);

// JSON Schema tools, as the Python scenario declares them (strict: false keeps the schema as written; the SDK then
// only JSON-parses the arguments, so a value outside the enum reaches the tool)
const getWeather = tool({
  name: 'get_weather',
  description: 'Current weather in a city.',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
    required: ['city', 'unit'],
  },
  strict: false,
  execute: async ({ city, unit }) => `sunny, 21 degrees ${unit}, in ${city}`,
});
const getPopulation = tool({
  name: 'get_population',
  description: 'Population of a city.',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  strict: false,
  execute: async () => {
    throw new Error('census service unreachable');
  },
});

const agent = new Agent({
  name: 'weather',
  instructions: 'Answer with the tools.',
  model: 'gpt-4o-mini',
  tools: [getWeather, getPopulation],
});
const runner = new Runner({ modelProvider: new OpenAIProvider({ apiKey: 'sk-local-fake', baseURL }) });

// A call of a tool the agent lacks: the SDK's default ends the run (ModelBehaviorError), and then this
// instrumentation never ends its root span (its check for a failed top-level agent compares the SDK's parent id
// with an OpenTelemetry span id), so the trace gets no verdict. The run option answers the model
// "Tool 'book_flight' not found." instead, and the run goes on; UNKNOWN_TOOL=raise keeps the SDK's default.
const raise = process.env.UNKNOWN_TOOL === 'raise';
let out;
try {
  const result = await runner.run(agent, 'Weather in Paris, Rome and Oslo, and how many people live in Paris?', {
    maxTurns: 10,
    toolNotFoundBehavior: raise ? 'raise_error' : 'return_error_to_model',
  });
  out = { text: result.finalOutput };
} catch (error) {
  if (!raise || !(error instanceof ModelBehaviorError)) throw error;
  out = { error: error.message };
}
await provider.forceFlush();
await provider.shutdown();
console.log(JSON.stringify(out));
