// The official Google Gen AI SDK (@google/genai 3.3.0), unmodified, in
// Vertex AI mode (Gemini Enterprise Agent Platform), making Veo videos
// against the fake of Vertex AI that shared/providers/gemini's TestVertexSDKContract
// starts on 127.0.0.1: models.generateVideos, then
// operations.getVideosOperation until the operation is done. The test
// compares the SDK's requests with Genway's adapter's, and checks what the
// SDK read from the fake's answers, printed here as one JSON line per case.
//
// Env: VERTEX_BASE_URL (the fake), VERTEX_PROJECT, VERTEX_REGION,
// VERTEX_TOKEN (a bearer token the fake accepts: no Google sign-in, no
// network), VERTEX_CASES (a JSON list of {model, prompt, aspectRatio,
// resolution, durationSeconds, outputGcsUri?}).
import { GoogleGenAI } from '@google/genai';
import { OAuth2Client } from 'google-auth-library'; // @google/genai's own dependency

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is required`);
  return v;
};

// A fixed token: the SDK adds it as "Authorization: Bearer ..." and never
// asks Google for one.
const auth = new OAuth2Client();
auth.setCredentials({ access_token: env('VERTEX_TOKEN'), expiry_date: Date.now() + 3600e3 });

const ai = new GoogleGenAI({
  vertexai: true,
  project: env('VERTEX_PROJECT'),
  location: env('VERTEX_REGION'),
  apiVersion: 'v1',
  googleAuthOptions: { authClient: auth },
  httpOptions: { baseUrl: env('VERTEX_BASE_URL') },
});

for (const c of JSON.parse(env('VERTEX_CASES'))) {
  const config = {
    numberOfVideos: 1,
    durationSeconds: c.durationSeconds,
    aspectRatio: c.aspectRatio,
    resolution: c.resolution,
    generateAudio: true,
  };
  if (c.outputGcsUri) config.outputGcsUri = c.outputGcsUri;
  let op = await ai.models.generateVideos({ model: c.model, source: { prompt: c.prompt }, config });
  for (let i = 0; i < 20 && !op.done; i++) {
    op = await ai.operations.getVideosOperation({ operation: op });
  }
  const video = op.response?.generatedVideos?.[0]?.video;
  console.log(JSON.stringify({
    prompt: c.prompt,
    name: op.name,
    done: op.done ?? false,
    error: op.error ?? null,
    videoBytes: video?.videoBytes ?? null,
    uri: video?.uri ?? null,
    mimeType: video?.mimeType ?? null,
    raiMediaFilteredCount: op.response?.raiMediaFilteredCount ?? null,
    raiMediaFilteredReasons: op.response?.raiMediaFilteredReasons ?? null,
  }));
}
