import OpenAI from "openai";

// Genway's address with /v1 and a Genway key (sk_live_...): chat
// completions (openai.chat.completions) and the Responses API
// (openai.responses) both go through Genway.
export const openai = new OpenAI({
  baseURL: (process.env.GENWAY_URL ?? "http://127.0.0.1:8080") + "/v1",
  apiKey: process.env.GENWAY_API_KEY,
});
