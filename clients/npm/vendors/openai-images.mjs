// OpenAI's official client (openai 7.57.0) makes the call Genway's Images
// API adapter makes: images.generate. The value read is the answer as the
// SDK parsed it, each image's base64 given as its length in bytes.
import OpenAI from "openai";
import { run } from "./contract.mjs";

await run(async ({ base, key, args }) => {
  const client = new OpenAI({ apiKey: key, baseURL: base + "/v1", maxRetries: 0 });
  const res = await client.images.generate(args.request);
  return {
    created: res.created,
    size: res.size ?? null,
    quality: res.quality ?? null,
    output_format: res.output_format ?? null,
    usage: res.usage ?? null,
    data: (res.data ?? []).map((d) => ({
      bytes: d.b64_json ? Buffer.from(d.b64_json, "base64").length : 0,
      url: d.url ?? null,
      revised_prompt: d.revised_prompt ?? null,
    })),
  };
});
