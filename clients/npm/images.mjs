// The official OpenAI Node SDK's images.generate, unmodified, against a
// running Genway: each image case in both response formats' ways (the
// model's default b64_json, or url: our own link, fetched without a key),
// each image's format and size read from its bytes, and Genway's
// refusals as the SDK's typed errors.
// Run by cmd/genway's TestNPMImages with GENWAY_URL, GENWAY_KEY and
// GENWAY_IMAGE_CASES: a JSON list of {model, prompt, n, size,
// output_format, response_format ("" for the model's default), format,
// width, height}, the last three being what each image must be (a fake
// vendor hands out its own picture). For each image it prints
// "image <model> <index> sha256 <hex of the bytes>", and for each link
// "link <model> <index> <url>", for the test to check.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import OpenAI from "openai";

const client = new OpenAI({ baseURL: process.env.GENWAY_URL + "/v1", apiKey: process.env.GENWAY_KEY, maxRetries: 0 });
const cases = JSON.parse(process.env.GENWAY_IMAGE_CASES);

async function check(name, fn) {
  await fn();
  console.log("ok " + name);
}

// picture reads an image's format and size from its bytes: PNG's IHDR,
// or a JPEG's start-of-frame marker.
function picture(buf) {
  if (buf.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) {
    assert.equal(buf.toString("latin1", 12, 16), "IHDR", "a PNG starts with IHDR");
    return { format: "png", width: buf.readUInt32BE(16), height: buf.readUInt32BE(20) };
  }
  assert.ok(buf[0] === 0xff && buf[1] === 0xd8, "neither a PNG nor a JPEG");
  for (let at = 2; at + 9 < buf.length; ) {
    assert.equal(buf[at], 0xff, `a JPEG marker at ${at}`);
    const marker = buf[at + 1];
    const length = buf.readUInt16BE(at + 2);
    if (marker >= 0xc0 && marker <= 0xc3) {
      return { format: "jpeg", width: buf.readUInt16BE(at + 7), height: buf.readUInt16BE(at + 5) };
    }
    at += 2 + length;
  }
  assert.fail("a JPEG without a start of frame");
}

for (const c of cases) {
  const how = c.response_format || "default";
  await check(`images ${c.model} ${how} ${c.output_format} ${c.size} n=${c.n}`, async () => {
    const params = { model: c.model, prompt: c.prompt, n: c.n, size: c.size, output_format: c.output_format };
    if (c.response_format) params.response_format = c.response_format;
    const res = await client.images.generate(params);
    assert.ok(res.created > 0, "created");
    assert.equal(res.data.length, c.n);
    assert.equal(res.output_format, c.output_format);
    for (const [i, d] of res.data.entries()) {
      let buf;
      if (c.response_format === "url") {
        assert.equal(d.b64_json, undefined, "a url answer holds no bytes");
        console.log(`link ${c.model} ${i} ${d.url}`); // the test checks it is our own
        const got = await fetch(d.url); // no key: the link is signed
        assert.equal(got.status, 200, `GET ${d.url}`);
        buf = Buffer.from(await got.arrayBuffer());
      } else {
        assert.equal(d.url, undefined, "a b64_json answer holds no link");
        buf = Buffer.from(d.b64_json, "base64");
      }
      const p = picture(buf);
      assert.deepEqual(p, { format: c.format, width: c.width, height: c.height });
      console.log(`image ${c.model} ${i} sha256 ${createHash("sha256").update(buf).digest("hex")}`);
    }
  });
}

const model = cases[0].model;

await check("a size the model lacks is a BadRequestError naming size", async () => {
  await assert.rejects(client.images.generate({ model, prompt: "a fox", size: "123x456" }), (err) => {
    assert.ok(err instanceof OpenAI.BadRequestError, `got ${err?.constructor?.name}`);
    assert.equal(err.status, 400);
    assert.equal(err.code, "invalid_value");
    assert.equal(err.param, "size");
    return true;
  });
});

await check("streaming is refused, naming stream", async () => {
  await assert.rejects(client.images.generate({ model, prompt: "a fox", stream: true }), (err) => {
    assert.ok(err instanceof OpenAI.BadRequestError, `got ${err?.constructor?.name}`);
    assert.equal(err.param, "stream");
    return true;
  });
});

await check("an unknown model is a NotFoundError", async () => {
  await assert.rejects(client.images.generate({ model: "no-such-image-model", prompt: "a fox" }), (err) => {
    assert.ok(err instanceof OpenAI.NotFoundError, `got ${err?.constructor?.name}`);
    assert.equal(err.code, "model_not_found");
    return true;
  });
});
