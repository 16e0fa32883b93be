// A Node MCP tool server (the official @modelcontextprotocol/sdk, stdio transport) for the cross-service trace
// of tests/integration/test_cross_service.py: a Python agent process spawns it, calls its tools, and both export
// OTLP to one scoring service. The agent's MCP client (the MCP Python SDK) puts its trace context into each
// request's `_meta` (`traceparent`, W3C); this server continues that trace, so its `tools/call` span (MCP semantic
// conventions, kind SERVER) has a remote parent: the agent's span in the other process. Exports to
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, which must be on 127.0.0.1. Nothing may be written to stdout but MCP.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, propagation } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';

const endpoint = process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
if (!endpoint?.startsWith('http://127.0.0.1:')) throw new Error('the OTLP endpoint must be on 127.0.0.1');

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'node-mcp-server' }),
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: endpoint }), { scheduledDelayMillis: 50 })],
});
provider.register(); // the W3C trace-context propagator that reads `_meta.traceparent`
const tracer = provider.getTracer('node-mcp-server');

const TOOLS = [
  {
    name: 'get_weather',
    description: 'Current weather in a city.',
    inputSchema: {
      type: 'object',
      properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
      required: ['city', 'unit'],
    },
  },
  {
    name: 'get_population',
    description: 'Population of a city.',
    inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
];

function run(name, args) {
  if (name === 'get_weather') return { content: [{ type: 'text', text: `sunny, 21 degrees ${args.unit}, in ${args.city}` }] };
  if (name === 'get_population') return { content: [{ type: 'text', text: 'census service unreachable' }], isError: true };
  return { content: [{ type: 'text', text: `Unknown tool: ${name}` }], isError: true };
}

const server = new Server({ name: 'weather', version: '1.0.0' }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));
server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
  const { name, arguments: args = {}, _meta: meta } = request.params;
  const parent = propagation.extract(ROOT_CONTEXT, meta ?? {}); // the agent's span, in the other process
  const span = tracer.startSpan(
    `tools/call ${name}`,
    {
      kind: SpanKind.SERVER,
      attributes: {
        'mcp.method.name': 'tools/call',
        'gen_ai.tool.name': name,
        'gen_ai.tool.call.arguments': JSON.stringify(args),
        'jsonrpc.request.id': String(extra.requestId),
      },
    },
    parent,
  );
  // the schema is the agent's to check: this server runs what it is sent (as many do)
  const result = run(name, args);
  if (result.isError) {
    span.setAttribute('error.type', 'tool_error');
    span.setStatus({ code: SpanStatusCode.ERROR, message: result.content[0].text });
  } else {
    span.setAttribute('gen_ai.tool.call.result', JSON.stringify(result.content));
  }
  span.end();
  // exported before the answer goes back, so the service has this part before the agent's root ends
  await provider.forceFlush();
  return result;
});

const transport = new StdioServerTransport();
transport.onclose = () => provider.shutdown();
await server.connect(transport);
