// A real Vercel AI SDK agent (ai 7 + @ai-sdk/openai) running the shared scenario (tests/framework_scenario.py)
// against the local fake of the OpenAI API, its telemetry exported over OTLP/HTTP (protobuf) to the scoring
// service. Unchanged but for its endpoints: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and OPENAI_BASE_URL, both on
// 127.0.0.1. TELEMETRY=otel uses @ai-sdk/otel's OpenTelemetry integration (GenAI spans: execute_tool ...),
// TELEMETRY=legacy its LegacyOpenTelemetry (ai.toolCall spans).
import { createOpenAI } from '@ai-sdk/openai';
import { LegacyOpenTelemetry, OpenTelemetry } from '@ai-sdk/otel';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { generateText, jsonSchema, registerTelemetry, stepCountIs, tool } from 'ai';

const endpoint = process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
const baseURL = process.env.OPENAI_BASE_URL;
if (!endpoint?.startsWith('http://127.0.0.1:') || !baseURL?.startsWith('http://127.0.0.1:')) {
  throw new Error('both endpoints must be on 127.0.0.1');
}

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'vercel-ai-agent' }),
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: endpoint }), { scheduledDelayMillis: 50 })],
});
provider.register(); // the global tracer and the AsyncLocalStorage context: parents across awaits

const legacy = process.env.TELEMETRY === 'legacy';
registerTelemetry(legacy ? new LegacyOpenTelemetry() : new OpenTelemetry());

const getWeather = tool({
  description: 'Current weather in a city.',
  inputSchema: jsonSchema({
    type: 'object',
    properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
    required: ['city', 'unit'],
  }),
  execute: async ({ city, unit }) => `sunny, 21 degrees ${unit}, in ${city}`,
});
const getPopulation = tool({
  description: 'Population of a city.',
  inputSchema: jsonSchema({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }),
  execute: async () => {
    throw new Error('census service unreachable');
  },
});

const openai = createOpenAI({ baseURL, apiKey: 'sk-local-fake' });
const result = await generateText({
  model: openai.chat('gpt-4o-mini'),
  system: 'You are a helpful assistant.',
  prompt: 'What is the weather in Paris, Rome and Oslo, and how many people live in Paris?',
  tools: { get_weather: getWeather, get_population: getPopulation },
  stopWhen: stepCountIs(10),
  telemetry: { functionId: 'weather-agent' },
});
await provider.forceFlush();
await provider.shutdown();
console.log(JSON.stringify({ steps: result.steps.length, text: result.text }));
