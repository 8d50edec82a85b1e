// The official OpenAI Node SDK's Videos API, unmodified, against a running
// Genway: videos.create (multipart, as the SDK sends it), retrieve (polled
// until completed), list (paged with after/limit, both orders),
// downloadContent (the MP4, checked box by box) and delete, with its
// refusals as the SDK's typed errors.
// Run by cmd/genway's TestNPMVideos with GENWAY_URL, GENWAY_KEY and
// GENWAY_VIDEO_CASES: a JSON list of {model, seconds, size, duration,
// width, height}, duration/width/height being what the MP4 must have (a
// fake vendor hands out its own clip). For each video it prints
// "video <model> <id> sha256 <hex of the bytes>" for the test to compare.
import assert from "node:assert/strict";
import { File as BufferFile } from "node:buffer";
import { createHash } from "node:crypto";
import OpenAI from "openai";

// Node 18 (Debian bookworm's, which scripts/test.sh installs on a fresh
// machine) has no global File, which the SDK's uploads need; the SDK's own
// error message says to take it from node:buffer. Newer Node has it.
globalThis.File ??= BufferFile;

const client = new OpenAI({ baseURL: process.env.GENWAY_URL + "/v1", apiKey: process.env.GENWAY_KEY, maxRetries: 0 });
const cases = JSON.parse(process.env.GENWAY_VIDEO_CASES);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function check(name, fn) {
  await fn();
  console.log("ok " + name);
}

// boxes returns the ISO BMFF boxes in buf[from, to): {type, start, end}.
function boxes(buf, from = 0, to = buf.length) {
  const out = [];
  for (let at = from; at + 8 <= to; ) {
    const size = buf.readUInt32BE(at);
    assert.ok(size >= 8 && at + size <= to, `box at ${at} of size ${size} overruns its parent`);
    out.push({ type: buf.toString("latin1", at + 4, at + 8), start: at + 8, end: at + size });
    at += size;
  }
  return out;
}

// mp4 reads an MP4's duration (mvhd) and its first track's size (tkhd).
function mp4(buf) {
  const top = boxes(buf);
  assert.equal(top[0]?.type, "ftyp", "an MP4 starts with ftyp");
  const moov = top.find((b) => b.type === "moov");
  assert.ok(moov, "an MP4 has a moov box");
  const inner = boxes(buf, moov.start, moov.end);
  const mvhd = inner.find((b) => b.type === "mvhd");
  const v1 = buf[mvhd.start] === 1;
  const timescale = buf.readUInt32BE(mvhd.start + (v1 ? 20 : 12));
  const duration = v1 ? Number(buf.readBigUInt64BE(mvhd.start + 24)) : buf.readUInt32BE(mvhd.start + 16);
  const trak = inner.find((b) => b.type === "trak");
  const tkhd = boxes(buf, trak.start, trak.end).find((b) => b.type === "tkhd");
  const wAt = tkhd.end - 8; // tkhd ends with width and height, 16.16 fixed point
  return { seconds: duration / timescale, width: buf.readUInt32BE(wAt) >>> 16, height: buf.readUInt32BE(wAt + 4) >>> 16 };
}

const made = []; // ids, in the order made
const createdAt = {}; // by id
for (const c of cases) {
  await check(`videos ${c.model} ${c.seconds}s ${c.size}`, async () => {
    const created = await client.videos.create({ model: c.model, prompt: "a red ball bouncing on a beach", seconds: c.seconds, size: c.size });
    assert.equal(created.object, "video");
    assert.equal(created.model, c.model);
    assert.equal(created.status, "queued");
    assert.equal(created.progress, 0);
    assert.equal(created.seconds, c.seconds);
    assert.equal(created.size, c.size);
    assert.equal(created.prompt, "a red ball bouncing on a beach");
    assert.equal(created.completed_at, null);
    assert.equal(created.error, null);
    assert.equal(created.remixed_from_video_id, null);
    assert.equal(typeof created.created_at, "number");

    let v = created;
    let progress = 0;
    for (let i = 0; i < 600 && (v.status === "queued" || v.status === "in_progress"); i++) {
      await sleep(100);
      v = await client.videos.retrieve(created.id);
      assert.ok(v.progress >= progress, `progress went back from ${progress} to ${v.progress}`);
      progress = v.progress;
      if (v.status !== "completed") {
        // Not ready: the content is a 404, as OpenAI answers it (unless
        // the video completed in between).
        try {
          await client.videos.downloadContent(created.id);
        } catch (e) {
          assert.ok(e instanceof OpenAI.NotFoundError && e.code === "video_not_ready", `content before completion: ${e}`);
        }
      }
    }
    assert.equal(v.status, "completed", JSON.stringify(v));
    assert.equal(v.progress, 100);
    assert.equal(v.id, created.id);
    assert.equal(typeof v.completed_at, "number");
    assert.ok(v.expires_at > v.completed_at, "expires_at after completed_at");

    const res = await client.videos.downloadContent(v.id);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), "video/mp4");
    const buf = Buffer.from(await res.arrayBuffer());
    assert.equal(Number(res.headers.get("content-length")), buf.length);
    const info = mp4(buf);
    assert.equal(info.seconds, c.duration, "the MP4's duration");
    assert.equal(info.width, c.width, "the MP4's width");
    assert.equal(info.height, c.height, "the MP4's height");
    const same = Buffer.from(await (await client.videos.downloadContent(v.id, { variant: "video" })).arrayBuffer());
    assert.ok(same.equals(buf), "variant=video is the same MP4");
    console.log(`video ${c.model} ${v.id} sha256 ${createHash("sha256").update(buf).digest("hex")}`);
    made.push(v.id);
    createdAt[v.id] = v.created_at;
  });
}

// The listing's order: by created_at (whole seconds), then by id.
const byAge = (ids) => [...ids].sort((a, b) => createdAt[a] - createdAt[b] || (a < b ? -1 : a > b ? 1 : 0));

await check("videos list", async () => {
  const oldest = byAge(made);
  const newest = [...oldest].reverse();
  const ids = [];
  let pages = 0;
  // The SDK pages by itself: after = the last_id of each page.
  for await (const v of client.videos.list({ limit: 1 })) {
    assert.equal(v.object, "video");
    ids.push(v.id);
  }
  assert.deepEqual(ids, newest);
  const asc = [];
  for await (const v of client.videos.list({ limit: 2, order: "asc" })) asc.push(v.id);
  assert.deepEqual(asc, oldest);
  let page = await client.videos.list({ limit: 1 });
  for (; ; pages++) {
    assert.equal(page.data.length, 1);
    if (!page.hasNextPage()) break;
    page = await page.getNextPage();
  }
  assert.equal(pages + 1, made.length, "one page per video");
  const all = await client.videos.list();
  assert.deepEqual(all.data.map((v) => v.id), newest);
  assert.equal(all.has_more, false);
});

await check("videos refusals", async () => {
  const c = cases[0];
  await assert.rejects(client.videos.create({ model: "sora-2", prompt: "p" }), (e) => e instanceof OpenAI.NotFoundError && e.param === "model");
  await assert.rejects(client.videos.create({ prompt: "p" }), (e) => e instanceof OpenAI.BadRequestError && e.param === "model");
  await assert.rejects(client.videos.create({ model: c.model, prompt: "p", seconds: "99" }), (e) => e instanceof OpenAI.BadRequestError && e.param === "seconds");
  await assert.rejects(client.videos.create({ model: c.model, prompt: "p", size: "1x1" }), (e) => e instanceof OpenAI.BadRequestError && e.param === "size");
  const ref = new File([Buffer.from("\x89PNG\r\n\x1a\n")], "ref.png", { type: "image/png" });
  await assert.rejects(
    client.videos.create({ model: c.model, prompt: "p", input_reference: ref }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === "input_reference",
  );
  await assert.rejects(client.videos.retrieve("video_123"), (e) => e instanceof OpenAI.NotFoundError && e.code === "video_not_found");
  await assert.rejects(client.videos.downloadContent(made[0], { variant: "thumbnail" }), (e) => e instanceof OpenAI.BadRequestError && e.param === "variant");
  await assert.rejects(client.videos.list({ after: "video_123" }), (e) => e instanceof OpenAI.BadRequestError && e.param === "after");
});

await check("videos delete", async () => {
  const id = made[0];
  const d = await client.videos.delete(id);
  assert.deepEqual({ ...d }, { id, object: "video.deleted", deleted: true });
  await assert.rejects(client.videos.retrieve(id), (e) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(client.videos.downloadContent(id), (e) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(client.videos.delete(id), (e) => e instanceof OpenAI.NotFoundError);
  const ids = [];
  for await (const v of client.videos.list({ limit: 1 })) ids.push(v.id);
  assert.deepEqual(ids, byAge(made.slice(1)).reverse());
  console.log(`deleted ${id}`);
});
