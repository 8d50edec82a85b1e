// Google's official client (@google/genai 3.3.0) makes the call Genway's
// Gemini image adapter makes: models.generateContent with image output
// (config.responseModalities ["IMAGE"] and config.imageConfig). The value
// read is what the SDK parsed: the finish and block reasons, each image
// part's media type and size in bytes, and the usage.
import { GoogleGenAI } from "@google/genai";
import { run } from "./contract.mjs";

await run(async ({ base, key, args }) => {
  const ai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: base } });
  const res = await ai.models.generateContent(args.request);
  const parts = res.candidates?.[0]?.content?.parts ?? [];
  return {
    finishReason: res.candidates?.[0]?.finishReason ?? null,
    blockReason: res.promptFeedback?.blockReason ?? null,
    images: parts
      .filter((p) => p.inlineData)
      .map((p) => ({ mimeType: p.inlineData.mimeType, bytes: Buffer.from(p.inlineData.data, "base64").length })),
    usage: res.usageMetadata ?? null,
  };
});
