// OpenAI's official client (openai) makes the call Genway's OpenAI speech
// adapter makes: audio.speech.create. Each call's args are the SDK's own
// request; the value read is the audio's size and type and how many pieces
// it arrived in (the body is read as a stream).
import OpenAI from "openai";
import { readAudio, run } from "./contract.mjs";

await run(async ({ base, key, args }) => {
  // No retries: a 429 or a 500 is reported as the SDK saw it.
  const client = new OpenAI({ apiKey: key, baseURL: base, maxRetries: 0 });
  const response = await client.audio.speech.create(args.request);
  return { ...(await readAudio(response.body)), contentType: response.headers.get("content-type") };
});
