// Google's official client (@google/genai 2.32.0, installed as genai2:
// the last version whose generateVideos speaks the Gemini API's
// predictLongRunning) makes the calls Genway's Veo adapter makes:
// models.generateVideos, then operations.getVideosOperation until the
// operation is done. The value read is the done flags in order and the
// final operation as the SDK parsed it.
import { GoogleGenAI } from "genai2";
import { maxPolls, pause, run } from "./contract.mjs";

await run(async ({ base, key, args }) => {
  const ai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: base } });
  let op = await ai.models.generateVideos(args.request);
  const done = [Boolean(op.done)];
  for (let i = 0; !op.done && i < maxPolls; i++) {
    await pause(5);
    op = await ai.operations.getVideosOperation({ operation: op });
    done.push(Boolean(op.done));
  }
  return { name: op.name, done, error: op.error ?? null, response: op.response ?? null };
});
