// The Anthropic SDK (@anthropic-ai/sdk 1.x, which sends anthropic-version
// 2026-10-21 and the key as Authorization: Bearer), unmodified, against a
// running Genway's Messages API: messages.create, messages.stream with text
// and with a tool round trip, countTokens, and the error classes and types
// of a refusal. Run by cmd/genway's TestAnthropicSDK with GENWAY_URL,
// GENWAY_API_KEY (the dev key), GENWAY_BROKE_KEY (a key of an account
// without credits) and GENWAY_PRICED_MODEL set, through the client of
// docs/agents.md (agents/anthropic-client.mjs), without retries.
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import { VERSION } from "@anthropic-ai/sdk/version";
import { anthropic } from "./agents/anthropic-client.mjs";

const client = anthropic.withOptions({ maxRetries: 0 });
const model = "synthetic/echo";
const tools = [{
  name: "get_weather",
  description: "Weather in a city.",
  input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
}];

async function check(name, fn) {
  await fn();
  console.log("ok " + name);
}

console.log("@anthropic-ai/sdk " + VERSION);

await check("messages.create", async () => {
  const m = await client.messages.create({ model, max_tokens: 100, messages: [{ role: "user", content: "hello there" }] });
  assert.equal(m.type, "message");
  assert.equal(m.role, "assistant");
  assert.equal(m.model, model);
  assert.equal(m.stop_reason, "end_turn");
  assert.deepEqual(m.content.map((b) => [b.type, b.text]), [["text", "You said: hello there"]]);
  assert.equal(m.usage.input_tokens, 2);
  assert.equal(m.usage.output_tokens, 4);
  assert.match(m.id, /^msg_/);
  assert.ok(m._request_id, "the request-id header");
});

await check("messages.stream text", async () => {
  const s = client.messages.stream({ model, max_tokens: 100, messages: [{ role: "user", content: "stream these words" }] });
  const events = [];
  let text = "";
  s.on("streamEvent", (e) => events.push(e.type));
  s.on("text", (t) => { text += t; });
  const m = await s.finalMessage();
  assert.equal(text, "You said: stream these words");
  assert.equal(m.content[0].text, text);
  assert.equal(m.stop_reason, "end_turn");
  assert.equal(events[0], "message_start");
  assert.equal(events.at(-1), "message_stop");
  assert.ok(events.filter((e) => e === "content_block_delta").length >= 2, "the text arrives in pieces");
  assert.equal(m.usage.output_tokens, 5);
});

await check("messages.stream tool round trip", async () => {
  const messages = [{ role: "user", content: 'What is the weather? CALL_TOOL get_weather {"city": "Paris"}' }];
  const first = await client.messages.stream({ model, max_tokens: 200, tools, messages }).finalMessage();
  assert.equal(first.stop_reason, "tool_use");
  const call = first.content.find((b) => b.type === "tool_use");
  assert.equal(call.name, "get_weather");
  assert.deepEqual(call.input, { city: "Paris" });
  assert.match(call.id, /^(toolu_|call_)/);
  const next = [...messages, { role: "assistant", content: first.content },
    { role: "user", content: [{ type: "tool_result", tool_use_id: call.id, content: "18C and sunny" }] }];
  const second = await client.messages.stream({ model, max_tokens: 200, tools, messages: next }).finalMessage();
  assert.equal(second.stop_reason, "end_turn");
  assert.equal(second.content[0].text, "Tool get_weather returned: 18C and sunny");
});

await check("countTokens", async () => {
  const n = await client.messages.countTokens({ model, messages: [{ role: "user", content: "hello there" }], tools });
  assert.ok(Number.isInteger(n.input_tokens) && n.input_tokens > 0, JSON.stringify(n));
});

// errorOf returns what the SDK threw for params, sent with client c.
async function errorOf(c, params) {
  try {
    await c.messages.create({ max_tokens: 16, messages: [{ role: "user", content: "hi" }], ...params });
  } catch (e) {
    return e;
  }
  assert.fail("no error for " + JSON.stringify(params));
}

await check("errors", async () => {
  const missing = await errorOf(client, { model: "nope/not-a-model" });
  assert.ok(missing instanceof Anthropic.NotFoundError, missing.constructor.name);
  assert.equal(missing.status, 404);
  assert.equal(missing.type, "not_found_error");
  assert.ok(missing.requestID, "the request-id header");

  const broke = client.withOptions({ apiKey: process.env.GENWAY_BROKE_KEY });
  const poor = await errorOf(broke, { model: process.env.GENWAY_PRICED_MODEL });
  assert.ok(poor instanceof Anthropic.PaymentRequiredError, poor.constructor.name);
  assert.equal(poor.status, 402);
  assert.equal(poor.type, "billing_error");

  const stranger = client.withOptions({ apiKey: "sk_live_" + "z".repeat(32) });
  const denied = await errorOf(stranger, { model });
  assert.ok(denied instanceof Anthropic.AuthenticationError, denied.constructor.name);
  assert.equal(denied.type, "authentication_error");

  // API version 2026-10-21 (this SDK's) has no temperature: a 400 naming it.
  const bad = await errorOf(client, { model, temperature: 0.5 });
  assert.ok(bad instanceof Anthropic.BadRequestError, bad.constructor.name);
  assert.equal(bad.type, "invalid_request_error");
  assert.match(bad.message, /temperature/);
});
