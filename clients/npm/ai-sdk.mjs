// The Vercel AI SDK, unmodified, against a running Genway: generateText
// and streamText with a tool (a multi-step round trip) and generateObject
// / streamObject with a zod schema, through @ai-sdk/openai's default
// provider (the Responses API) and @ai-sdk/openai-compatible (chat
// completions). Run by cmd/genway's TestNPMClients with GENWAY_URL and
// GENWAY_KEY set.
import assert from "node:assert/strict";
import { generateText, streamText, generateObject, streamObject, tool, stepCountIs } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { z } from "zod";

const baseURL = process.env.GENWAY_URL + "/v1";
const apiKey = process.env.GENWAY_KEY;
const providers = {
  // The default provider: openai("...") speaks the Responses API.
  "openai (responses)": createOpenAI({ baseURL, apiKey })("synthetic/echo"),
  "openai-compatible (chat)": createOpenAICompatible({ name: "genway", baseURL, apiKey, supportsStructuredOutputs: true })(
    "synthetic/echo",
  ),
};

const tools = {
  get_weather: tool({
    description: "Weather in a city.",
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => `18 degrees in ${city}`,
  }),
};
const person = z.object({ name: z.string(), age: z.number(), tags: z.array(z.string()) });

async function check(name, fn) {
  await fn();
  console.log("ok " + name);
}

for (const [label, model] of Object.entries(providers)) {
  await check(label + " generateText", async () => {
    const r = await generateText({ model, prompt: "hello there", maxRetries: 0 });
    assert.equal(r.text, "You said: hello there");
  });

  await check(label + " generateText with a tool", async () => {
    const r = await generateText({
      model,
      tools,
      stopWhen: stepCountIs(3),
      prompt: "What is get_weather in Paris?",
      maxRetries: 0,
    });
    assert.equal(r.steps.length, 2);
    assert.equal(r.steps[0].toolCalls[0].toolName, "get_weather");
    assert.deepEqual(r.steps[0].toolCalls[0].input, { city: "synthetic" });
    assert.match(r.text, /^Tool get_weather returned: .*18 degrees in synthetic/);
  });

  await check(label + " streamText with a tool", async () => {
    const r = streamText({ model, tools, stopWhen: stepCountIs(3), prompt: "get_weather please", maxRetries: 0 });
    let deltas = 0;
    for await (const part of r.fullStream) {
      if (part.type === "text-delta") deltas++;
      if (part.type === "error") throw part.error;
    }
    const steps = await r.steps;
    assert.equal(steps.length, 2);
    assert.equal(steps[0].toolCalls[0].toolName, "get_weather");
    assert.ok(deltas >= 2, "text arrives in pieces");
    assert.match(await r.text, /^Tool get_weather returned: /);
  });

  await check(label + " generateObject", async () => {
    const r = await generateObject({ model, schema: person, prompt: "Ada, 36", maxRetries: 0 });
    assert.deepEqual(r.object, { name: "synthetic", age: 1, tags: [] });
  });

  await check(label + " streamObject", async () => {
    const r = streamObject({ model, schema: person, prompt: "Ada, 36", maxRetries: 0 });
    let partials = 0;
    for await (const _ of r.partialObjectStream) partials++;
    assert.deepEqual(await r.object, { name: "synthetic", age: 1, tags: [] });
    assert.ok(partials >= 2, "the object arrives in pieces");
  });
}

// Usage details through @ai-sdk/openai-compatible: reasoning tokens, and
// cached input tokens when a prompt_cache_key comes again (synthetic's
// prompt cache), whole and streamed.
await check("openai-compatible (chat) usage details", async () => {
  const model = createOpenAICompatible({ name: "genway", baseURL, apiKey })("synthetic/thinker");
  const providerOptions = { genway: { reasoningEffort: "low", prompt_cache_key: "ai-sdk-" + Date.now() } };
  const first = await generateText({ model, prompt: "hi there", providerOptions, maxRetries: 0 });
  assert.equal(first.usage.reasoningTokens, 9);
  assert.equal(first.usage.cachedInputTokens, 0);
  const r = streamText({ model, prompt: "hi there", providerOptions, maxRetries: 0 });
  await r.consumeStream();
  const usage = await r.usage;
  assert.equal(usage.reasoningTokens, 9);
  assert.equal(usage.cachedInputTokens, usage.inputTokens);
});
