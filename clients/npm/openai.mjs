// The official OpenAI Node SDK, unmodified, against a running Genway:
// chat tool calling (whole and streamed), structured output,
// responses.create (whole and streamed) with a function call round trip,
// and the usage details and cost of chat and Responses answers.
// Run by cmd/genway's TestNPMClients with GENWAY_URL and GENWAY_API_KEY set,
// through the client of docs/agents.md (agents/openai-client.mjs), without retries.
import assert from "node:assert/strict";
import { openai } from "./agents/openai-client.mjs";

const client = openai.withOptions({ maxRetries: 0 });
const model = "synthetic/echo";
const weather = {
  type: "object",
  properties: { city: { type: "string" } },
  required: ["city"],
  additionalProperties: false,
};
const chatTools = [{ type: "function", function: { name: "get_weather", description: "Weather in a city.", parameters: weather } }];
const responseTools = [{ type: "function", name: "get_weather", description: "Weather in a city.", parameters: weather, strict: true }];

async function check(name, fn) {
  await fn();
  console.log("ok " + name);
}

await check("chat tools", async () => {
  const messages = [{ role: "user", content: "Please get_weather for Paris" }];
  const first = await client.chat.completions.create({ model, messages, tools: chatTools });
  const choice = first.choices[0];
  assert.equal(choice.finish_reason, "tool_calls");
  assert.equal(choice.message.content, null);
  const call = choice.message.tool_calls[0];
  assert.equal(call.function.name, "get_weather");
  assert.deepEqual(JSON.parse(call.function.arguments), { city: "synthetic" });
  const second = await client.chat.completions.create({
    model,
    tools: chatTools,
    messages: [...messages, choice.message, { role: "tool", tool_call_id: call.id, content: "18 degrees" }],
  });
  assert.equal(second.choices[0].message.content, "Tool get_weather returned: 18 degrees");
});

await check("chat tools stream", async () => {
  const runner = client.chat.completions.stream({
    model,
    tools: chatTools,
    messages: [{ role: "user", content: "get_weather now" }],
  });
  let pieces = 0;
  runner.on("chunk", (c) => {
    if (c.choices[0]?.delta?.tool_calls) pieces++;
  });
  const done = await runner.finalChatCompletion();
  assert.ok(pieces >= 2, "arguments arrive in pieces");
  const call = done.choices[0].message.tool_calls[0];
  assert.equal(done.choices[0].finish_reason, "tool_calls");
  assert.equal(call.function.name, "get_weather");
  assert.deepEqual(JSON.parse(call.function.arguments), { city: "synthetic" });
});

await check("chat structured output", async () => {
  const r = await client.chat.completions.create({
    model,
    messages: [{ role: "user", content: "Ada" }],
    response_format: { type: "json_schema", json_schema: { name: "person", schema: weather, strict: true } },
  });
  assert.deepEqual(JSON.parse(r.choices[0].message.content), { city: "synthetic" });
});

await check("responses text", async () => {
  const r = await client.responses.create({ model, instructions: "be brief", input: "hello there" });
  assert.equal(r.output_text, "You said: hello there");
  assert.equal(r.status, "completed");
  assert.equal(r.usage.output_tokens, 4);
});

for (const stream of [false, true]) {
  await check("responses function call round trip" + (stream ? " stream" : ""), async () => {
    const input = [{ role: "user", content: "What is get_weather in Paris?" }];
    let first;
    if (stream) {
      const s = client.responses.stream({ model, input, tools: responseTools });
      const types = [];
      s.on("event", (e) => types.push(e.type));
      first = await s.finalResponse();
      assert.equal(types[0], "response.created");
      assert.ok(types.includes("response.function_call_arguments.delta"));
      assert.equal(types.at(-1), "response.completed");
    } else {
      first = await client.responses.create({ model, input, tools: responseTools });
    }
    const call = first.output.find((o) => o.type === "function_call");
    assert.ok(call, "a function_call item");
    assert.equal(call.name, "get_weather");
    assert.deepEqual(JSON.parse(call.arguments), { city: "synthetic" });
    const next = [...input, ...first.output, { type: "function_call_output", call_id: call.call_id, output: "18 degrees" }];
    let second;
    if (stream) {
      const s = client.responses.stream({ model, input: next, tools: responseTools });
      let text = "";
      s.on("response.output_text.delta", (e) => (text += e.delta));
      second = await s.finalResponse();
      assert.equal(text, second.output_text);
    } else {
      second = await client.responses.create({ model, input: next, tools: responseTools });
    }
    assert.equal(second.output_text, "Tool get_weather returned: 18 degrees");
  });
}

// Codex's tool types: a namespace's function and a custom tool with a
// grammar come back as a function_call with its namespace and a
// custom_tool_call with its input; the hosted web_search is left out.
const codexTools = [
  { type: "namespace", name: "multi_agent_v1", description: "Sub-agents.", tools: [
    { type: "function", name: "close_agent", parameters: { type: "object", properties: { target: { type: "string" } }, required: ["target"] } },
  ] },
  { type: "custom", name: "apply_patch", format: { type: "grammar", syntax: "lark", definition: "start: begin_patch hunk+ end_patch" } },
  { type: "web_search" },
];
for (const stream of [false, true]) {
  await check("responses namespace and custom calls" + (stream ? " stream" : ""), async () => {
    const input = 'CALL_TOOL close_agent {"target":"a1"} CALL_TOOL apply_patch {"input":"*** Begin Patch\\n*** End Patch\\n"}';
    const r = stream
      ? await client.responses.stream({ model, input, tools: codexTools }).finalResponse()
      : await client.responses.create({ model, input, tools: codexTools });
    const [fc, ct] = r.output;
    assert.equal(fc.type, "function_call");
    assert.equal(fc.namespace, "multi_agent_v1");
    assert.equal(fc.name, "close_agent");
    assert.equal(fc.arguments, '{"target":"a1"}');
    assert.equal(ct.type, "custom_tool_call");
    assert.equal(ct.name, "apply_patch");
    assert.equal(ct.input, "*** Begin Patch\n*** End Patch\n");
    const next = [{ role: "user", content: input }, ...r.output,
      { type: "function_call_output", call_id: fc.call_id, output: "closed" },
      { type: "custom_tool_call_output", call_id: ct.call_id, output: "patched" }];
    const second = await client.responses.create({ model, input: next, tools: codexTools });
    assert.equal(second.output_text, "Tool apply_patch returned: patched");
  });
}

await check("responses json schema", async () => {
  const r = await client.responses.create({
    model,
    input: "Ada",
    text: { format: { type: "json_schema", name: "place", schema: weather, strict: true } },
  });
  assert.deepEqual(JSON.parse(r.output_text), { city: "synthetic" });
});

// Usage details and cost (synthetic/thinker: its reasoning words are
// reasoning tokens; a prompt_cache_key seen before reads the shared
// messages from its prompt cache). The default catalog prices no
// synthetic model: cost is 0, a number.
await check("chat usage details", async () => {
  const key = "npm-chat-" + Date.now();
  const messages = [{ role: "user", content: "hi there" }];
  const ask = (extra) =>
    client.chat.completions.create({ model: "synthetic/thinker", reasoning_effort: "low", prompt_cache_key: key, messages, ...extra });
  const first = await ask({});
  assert.equal(first.usage.completion_tokens_details.reasoning_tokens, 9);
  assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0);
  assert.equal(first.usage.cost, 0);
  const stream = await ask({ stream: true, stream_options: { include_usage: true } });
  let usage;
  for await (const c of stream) if (c.usage) usage = c.usage;
  assert.equal(usage.prompt_tokens_details.cached_tokens, usage.prompt_tokens);
  assert.equal(usage.completion_tokens_details.reasoning_tokens, 9);
  assert.equal(usage.cost, 0);
});

await check("responses usage details", async () => {
  const key = "npm-responses-" + Date.now();
  const ask = () =>
    client.responses.create({ model: "synthetic/thinker", reasoning: { effort: "low" }, prompt_cache_key: key, input: "hi there" });
  await ask();
  const r = await ask();
  assert.equal(r.usage.output_tokens_details.reasoning_tokens, 9);
  assert.equal(r.usage.input_tokens_details.cached_tokens, r.usage.input_tokens);
  assert.equal(r.usage.cost, 0);
});
