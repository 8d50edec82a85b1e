// The official OpenAI Node SDK, unmodified, against a running Genway:
// audio.speech.create on the synthetic speech model, the audio read as a
// stream (it arrives in pieces, before the whole is made), as WAV and as
// MP3, with speed and instructions, with OpenAI's {"id"} voice form; and
// the SDK's errors for what Genway refuses. Run by cmd/genway's
// TestNPMSpeech with GENWAY_URL and GENWAY_KEY set.
import assert from "node:assert/strict";
import OpenAI, { BadRequestError, NotFoundError } from "openai";

const client = new OpenAI({ baseURL: process.env.GENWAY_URL + "/v1", apiKey: process.env.GENWAY_KEY, maxRetries: 0 });
const model = "synthetic-speech";
// 450 characters: 30 s of synthetic speech, 15 characters a second.
const input = "The quick brown fox jumps over the lazy dog. ".repeat(10);

async function check(name, fn) {
  await fn();
  console.log("ok " + name);
}

// stream reads a speech response's body piece by piece.
async function stream(response) {
  const pieces = [];
  for await (const piece of response.body) pieces.push(Buffer.from(piece));
  return { audio: Buffer.concat(pieces), pieces: pieces.length };
}

await check("speech wav streamed", async () => {
  const { data, response } = await client.audio.speech
    .create({ model, input, voice: "alloy", response_format: "wav" })
    .withResponse();
  assert.equal(response.headers.get("content-type"), "audio/wav");
  assert.equal(response.headers.get("x-genway-attempts"), "synthetic-speech=200");
  assert.equal(response.headers.get("content-length"), null, "no length: chunked");
  const { audio, pieces } = await stream(data);
  assert.ok(pieces > 2, `the audio arrives in pieces (got ${pieces})`);
  assert.equal(audio.toString("latin1", 0, 4), "RIFF");
  assert.equal(audio.toString("latin1", 8, 12), "WAVE");
  assert.equal(audio.readUInt32LE(24), 24000, "24 kHz");
  assert.equal(audio.readUInt32LE(40), audio.length - 44, "the data size is the length");
  assert.equal(audio.length - 44, 2 * 1600 * input.length, "one 1/15 s slot of 16-bit samples per character");
});

await check("speech mp3 streamed", async () => {
  const response = await client.audio.speech.create({ model, input, voice: { id: "nova" } });
  assert.equal(response.headers.get("content-type"), "audio/mpeg");
  const { audio, pieces } = await stream(response);
  assert.ok(pieces > 2, `the audio arrives in pieces (got ${pieces})`);
  // The Info frame first: an MPEG-1 Layer III frame header, then "Info".
  assert.equal(audio[0], 0xff);
  assert.equal(audio[1] & 0xe0, 0xe0);
  assert.equal(audio.toString("latin1", 21, 25), "Info");
  assert.equal(audio.readUInt32BE(33), audio.length, "the Info frame counts every byte");
});

await check("speech speed and instructions", async () => {
  const slow = await client.audio.speech.create({ model, input: "hello", voice: "coral", response_format: "pcm", speed: 0.5 });
  const fast = await client.audio.speech.create({
    model,
    input: "hello",
    voice: "coral",
    response_format: "pcm",
    speed: 2,
    instructions: "Speak quickly.",
  });
  assert.equal(slow.headers.get("content-type"), "audio/pcm");
  const [a, b] = [Buffer.from(await slow.arrayBuffer()), Buffer.from(await fast.arrayBuffer())];
  assert.equal(a.length, 4 * b.length, "speed 0.5 lasts four times speed 2");
});

await check("speech errors", async () => {
  await assert.rejects(client.audio.speech.create({ model, input, voice: "darth" }), (err) => {
    assert.ok(err instanceof BadRequestError);
    assert.equal(err.param, "voice");
    return true;
  });
  await assert.rejects(client.audio.speech.create({ model, input, voice: "alloy", stream_format: "sse" }), (err) => {
    assert.ok(err instanceof BadRequestError);
    assert.equal(err.param, "stream_format");
    return true;
  });
  await assert.rejects(client.audio.speech.create({ model: "tts-1", input, voice: "alloy" }), NotFoundError);
});
