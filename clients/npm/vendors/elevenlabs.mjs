// ElevenLabs' official client (@elevenlabs/elevenlabs-js) makes the calls
// Genway's ElevenLabs adapter makes: sound generation
// (textToSoundEffects.convert) and music (music.compose, with a prompt or
// with a composition plan). Each call's args are the SDK's own request
// object; the value read is the audio's size and type.
import { ElevenLabsClient } from "@elevenlabs/elevenlabs-js";
import { readAll, run } from "./contract.mjs";

const methods = {
  sfx: (client, req) => client.textToSoundEffects.convert(req),
  music: (client, req) => client.music.compose(req),
};

await run(async ({ base, key, args }) => {
  // No retries: a 429 is reported as the SDK saw it.
  const client = new ElevenLabsClient({ apiKey: key, baseUrl: base, maxRetries: 0 });
  const { data, rawResponse } = await methods[args.method](client, args.request).withRawResponse();
  const audio = await readAll(data);
  return { bytes: audio.length, contentType: rawResponse.headers.get("content-type") };
});
