import Anthropic from "@anthropic-ai/sdk";

// Genway's address without /v1 (the SDK adds /v1/messages) and a Genway
// key (sk_live_...), which the SDK sends as Authorization: Bearer.
export const anthropic = new Anthropic({
  baseURL: process.env.GENWAY_URL ?? "http://127.0.0.1:8080",
  apiKey: process.env.GENWAY_API_KEY,
});
