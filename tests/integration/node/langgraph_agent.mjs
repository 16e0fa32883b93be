// A real LangGraph.js agent (@langchain/langgraph's StateGraph with its prebuilt ToolNode, @langchain/openai's
// ChatOpenAI) running the shared scenario (tests/framework_scenario.py) against the local fake of the OpenAI API,
// traced by OpenInference's LangChain instrumentation (@arizeai/openinference-instrumentation-langchain: TOOL, LLM
// and CHAIN spans of the OpenInference convention) and exported over OTLP/HTTP (protobuf) to the scoring service.
// Unchanged but for its endpoints: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and OPENAI_BASE_URL, both on 127.0.0.1.
import * as CallbackManagerModule from '@langchain/core/callbacks/manager';
import { tool } from '@langchain/core/tools';
import { END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { ToolNode } from '@langchain/langgraph/prebuilt';
import { ChatOpenAI } from '@langchain/openai';
import { LangChainInstrumentation } from '@arizeai/openinference-instrumentation-langchain';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';

const endpoint = process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
const baseURL = process.env.OPENAI_BASE_URL;
if (!endpoint?.startsWith('http://127.0.0.1:') || !baseURL?.startsWith('http://127.0.0.1:')) {
  throw new Error('both endpoints must be on 127.0.0.1');
}

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'langgraph-agent' }),
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: endpoint }), { scheduledDelayMillis: 50 })],
});
provider.register();
// ESM: no require hook patches @langchain/core, so the instrumentation is applied to its callback manager by hand.
// traceConfig {}: the OPENINFERENCE_HIDE_* variables apply (without a config object it ignores the environment).
const instrumentation = new LangChainInstrumentation({ tracerProvider: provider, traceConfig: {} });
instrumentation.manuallyInstrument(CallbackManagerModule);

// JSON Schema tools (not zod), as the Python scenario declares them
const getWeather = tool(async ({ city, unit }) => `sunny, 21 degrees ${unit}, in ${city}`, {
  name: 'get_weather',
  description: 'Current weather in a city.',
  schema: {
    type: 'object',
    properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
    required: ['city', 'unit'],
  },
});
const getPopulation = tool(
  async () => {
    throw new Error('census service unreachable');
  },
  {
    name: 'get_population',
    description: 'Population of a city.',
    schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
);
const tools = [getWeather, getPopulation];

const model = new ChatOpenAI({ model: 'gpt-4o-mini', apiKey: 'sk-local-fake', configuration: { baseURL } }).bindTools(
  tools,
);
const callModel = async (state) => ({ messages: [await model.invoke(state.messages)] });
const next = (state) => (state.messages.at(-1).tool_calls?.length ? 'tools' : END);
const graph = new StateGraph(MessagesAnnotation)
  .addNode('agent', callModel)
  .addNode('tools', new ToolNode(tools))
  .addEdge(START, 'agent')
  .addConditionalEdges('agent', next, ['tools', END])
  .addEdge('tools', 'agent')
  .compile();

const result = await graph.invoke(
  {
    messages: [
      { role: 'system', content: 'You are a helpful assistant.' },
      { role: 'user', content: 'What is the weather in Paris, Rome and Oslo, and how many people live in Paris?' },
    ],
  },
  { recursionLimit: 25 },
);
await provider.forceFlush();
await provider.shutdown();
const last = result.messages.at(-1);
const turns = result.messages.filter((m) => m.getType() === 'ai').length;
console.log(JSON.stringify({ steps: turns, text: last.content }));
