// ElevenLabs' official client (@elevenlabs/elevenlabs-js) makes the calls
// Genway's ElevenLabs adapter makes: sound generation
// (textToSoundEffects.convert), music (music.compose, with a prompt or
// with a composition plan) and streamed speech (textToSpeech.stream, whose
// request has the voice id apart). Each call's args are the SDK's own
// request object; the value read is the audio's size and type and how many
// pieces it arrived in.
import { ElevenLabsClient } from "@elevenlabs/elevenlabs-js";
import { readAudio, run } from "./contract.mjs";

const methods = {
  sfx: (client, req) => client.textToSoundEffects.convert(req),
  music: (client, req) => client.music.compose(req),
  tts: (client, req) => client.textToSpeech.stream(req.voiceId, req.body),
};

await run(async ({ base, key, args }) => {
  // No retries: a 429 is reported as the SDK saw it.
  const client = new ElevenLabsClient({ apiKey: key, baseUrl: base, maxRetries: 0 });
  const { data, rawResponse } = await methods[args.method](client, args.request).withRawResponse();
  return { ...(await readAudio(data)), contentType: rawResponse.headers.get("content-type") };
});
