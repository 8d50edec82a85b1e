// Genway console, playground: a chat that streams its answer as it
// arrives (fetch and a ReadableStream over the console's Server-Sent
// Events), a job form that follows its job to the end and plays the
// result, an image form that shows the images, and a speech form that
// plays the audio as it streams (MediaSource for MP3; other formats play
// from a blob after the end). Everything from the server or the model
// goes in as text.
"use strict";

const MAX_IMAGE_BYTES = 5 << 20;
const JOB_POLL_MS = 1000;
const JOB_POLL_LIMIT = 900; // polls: 15 minutes
const QUOTA_RETRIES = 600; // waits of QUOTA_WAIT_MS for a full MediaSource buffer to play on: 5 minutes
const QUOTA_WAIT_MS = 500;

// IMAGE_TYPES are the media types of the images API's output formats.
const IMAGE_TYPES = { png: "image/png", jpeg: "image/jpeg", webp: "image/webp" };
// AUDIO_EXT are the file extensions of the speech API's media types.
const AUDIO_EXT = { "audio/mpeg": "mp3", "audio/wav": "wav", "audio/ogg": "opus", "audio/aac": "aac", "audio/flac": "flac", "audio/pcm": "pcm" };

// post sends body as JSON with the session's CSRF token.
function post(url, body, accept) {
  return fetch(url, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", Accept: accept || "application/json", "X-CSRF-Token": csrfToken() },
    body: JSON.stringify(body),
  });
}

// errorOf is the message of a failed JSON answer.
async function errorOf(res) {
  try {
    const j = await res.json();
    if (j && j.error && j.error.message) return j.error.message;
  } catch {
    // not JSON
  }
  return res.status + " " + res.statusText;
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

// safeURL reports whether u may go in a src or href: http(s) or a path.
function safeURL(u) {
  return typeof u === "string" && (/^https?:\/\//i.test(u) || (u.startsWith("/") && !u.startsWith("//")));
}

// readDataURL reads a file as a data: URI.
function readDataURL(file) {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(r.result);
    r.onerror = () => reject(r.error);
    r.readAsDataURL(file);
  });
}

// readEvents calls onEvent(name, data) for each Server-Sent Event of res's
// body as it arrives (comments, the API's keep-alives, and [DONE] are
// skipped).
async function readEvents(res, onEvent) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let name = "message";
      let data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) name = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (data && data !== "[DONE]") onEvent(name, JSON.parse(data));
    }
  }
}

function setupChat(form) {
  const model = form.elements.model;
  const effort = document.getElementById("effort-field");
  const image = document.getElementById("image-field");
  const input = form.elements.message;
  const log = document.getElementById("chat-log");
  const status = document.getElementById("chat-status");
  const send = document.getElementById("chat-send");
  let history = [];

  const showOptions = () => {
    const o = model.selectedOptions[0];
    effort.hidden = !(o && o.hasAttribute("data-reasoning"));
    image.hidden = !(o && o.hasAttribute("data-vision"));
  };
  model.addEventListener("change", showOptions);
  showOptions();

  document.getElementById("chat-clear").addEventListener("click", () => {
    history = [];
    log.replaceChildren();
    status.textContent = "";
    input.focus();
  });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) form.requestSubmit();
  });

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    const body = { account: form.elements.account.value, model: model.value, messages: history.concat([{ role: "user", content: text }]) };
    if (!effort.hidden && form.elements.reasoning_effort.value) body.reasoning_effort = form.elements.reasoning_effort.value;
    const file = !image.hidden && form.elements.image.files[0];
    if (file) {
      if (file.size > MAX_IMAGE_BYTES) {
        status.textContent = "The image is larger than 5 MB.";
        return;
      }
      body.image = await readDataURL(file);
    }

    const you = el("p", undefined, "msg user");
    you.append(el("b", "You" + (file ? " (with " + file.name + ")" : "")), document.createTextNode(text));
    const reply = el("div", undefined, "msg assistant");
    const reasoning = el("p", undefined, "reasoning");
    reasoning.hidden = true;
    const answer = el("p", undefined, "answer");
    const answerText = document.createTextNode("");
    answer.append(answerText);
    reply.append(el("b", model.value), reasoning, answer);
    log.append(you, reply);
    send.disabled = true;
    status.textContent = "Waiting for the model…";
    let content = "";
    try {
      const res = await post("/console/playground/chat", body, "text/event-stream");
      if (!res.ok) throw new Error(await errorOf(res));
      status.textContent = "Streaming…";
      let ended = false;
      // The API's chat completion chunks: delta.content and
      // delta.reasoning_content as they arrive, a last chunk with the
      // finish reason and usage, or an error event mid-stream.
      await readEvents(res, (name, data) => {
        if (data.error) throw new Error(data.error.message);
        const choice = (data.choices || [])[0] || {};
        const d = choice.delta || {};
        if (d.reasoning_content) {
          reasoning.hidden = false;
          reasoning.append(document.createTextNode(d.reasoning_content));
        }
        if (d.content) {
          content += d.content;
          answerText.appendData(d.content);
        }
        log.scrollTop = log.scrollHeight;
        if (choice.finish_reason) {
          ended = true;
          const u = data.usage || {};
          status.textContent = "Done (" + choice.finish_reason + "): " + u.prompt_tokens + " prompt and " + u.completion_tokens + " completion tokens.";
        }
      });
      if (!ended) throw new Error("the stream ended early");
      history.push({ role: "user", content: text }, { role: "assistant", content: content });
      input.value = "";
      if (file) form.elements.image.value = "";
    } catch (err) {
      reply.append(el("p", "Error: " + err.message, "error"));
      status.textContent = "Failed.";
    } finally {
      send.disabled = false;
      input.focus();
    }
  });
}

function setupJob(form) {
  const type = form.elements.type;
  const model = form.elements.model;
  const duration = form.elements.duration;
  const status = document.getElementById("job-status");
  const timeline = document.getElementById("job-timeline");
  const player = document.getElementById("job-player");
  const send = document.getElementById("job-send");

  const pickModel = () => {
    let first = null;
    for (const o of model.options) {
      const ok = o.dataset.type === type.value;
      o.hidden = o.disabled = !ok;
      if (ok && !first) first = o;
    }
    if (model.selectedOptions[0] && model.selectedOptions[0].disabled && first) first.selected = true;
    pickDuration();
  };
  const pickDuration = () => {
    const o = model.selectedOptions[0];
    if (!o) return;
    duration.min = o.dataset.min;
    duration.max = o.dataset.max;
    duration.value = o.dataset.default;
  };
  type.addEventListener("change", pickModel);
  model.addEventListener("change", pickDuration);
  pickModel();

  // show renders a job's state; it returns true when the job is final.
  const show = (s) => {
    const a = el("a");
    a.href = "/console/jobs/" + encodeURIComponent(s.id);
    a.append(el("code", s.id));
    const badge = el("span", s.status, "status");
    if (["queued", "processing", "completed", "failed"].includes(s.status)) badge.classList.add("status-" + s.status);
    status.replaceChildren("Job ", a, ": ", badge);
    if (s.error) status.append(" " + s.error.code + ": " + s.error.message);
    timeline.replaceChildren(
      ...(s.timeline || []).map((t) => {
        const li = el("li", t.status + " " + t.at + (t.after ? " (+" + t.after + ")" : ""));
        return li;
      }),
    );
    if (s.status === "completed" && safeURL(s.url) && (s.kind === "audio" || s.kind === "video")) {
      const media = el(s.kind);
      media.controls = true;
      media.preload = "metadata";
      media.src = s.url;
      const dl = el("a", "Download");
      dl.href = s.url;
      dl.download = "";
      const p = el("p");
      p.append(dl, " (" + s.content_type + ")");
      player.replaceChildren(media, p);
    }
    return s.status === "completed" || s.status === "failed";
  };

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    send.disabled = true;
    player.replaceChildren();
    timeline.replaceChildren();
    status.textContent = "Creating the job…";
    try {
      const res = await post("/console/playground/job", {
        account: form.elements.account.value,
        type: type.value,
        model: model.value,
        prompt: form.elements.prompt.value,
        duration: parseInt(duration.value, 10) || 0,
      });
      if (!res.ok) throw new Error(await errorOf(res));
      let s = await res.json();
      for (let n = 0; !show(s) && n < JOB_POLL_LIMIT; n++) {
        await new Promise((r) => setTimeout(r, JOB_POLL_MS));
        const r = await fetch("/console/jobs/" + encodeURIComponent(s.id) + "/status", { headers: { Accept: "application/json" }, credentials: "same-origin" });
        if (!r.ok) throw new Error(await errorOf(r));
        s = await r.json();
      }
    } catch (err) {
      status.textContent = "Error: " + err.message;
    } finally {
      send.disabled = false;
    }
  });
}

// fillSelect replaces the options of sel with values (each its own label
// unless labels names one), selecting want if it is one of them.
function fillSelect(sel, values, want, labels) {
  sel.replaceChildren(
    ...values.map((v) => {
      const o = el("option", (labels && labels[v]) || v || "model default");
      o.value = v;
      if (v === want) o.selected = true;
      return o;
    }),
  );
}

// list is a data-* attribute's space-separated values.
function list(s) {
  return (s || "").split(" ").filter((v) => v);
}

// ms writes a duration in milliseconds.
function ms(t) {
  return Math.round(t) + " ms";
}

function setupImage(form) {
  const model = form.elements.model;
  const n = form.elements.n;
  const size = form.elements.size;
  const quality = form.elements.quality;
  const qualityField = document.getElementById("image-quality-field");
  const format = form.elements.output_format;
  const rf = form.elements.response_format;
  const status = document.getElementById("image-status");
  const gallery = document.getElementById("image-gallery");
  const send = document.getElementById("image-send");

  // The pickers offer what the model takes (GET /v1/models' fields).
  const pick = () => {
    const o = model.selectedOptions[0];
    if (!o) return;
    fillSelect(size, list(o.dataset.sizes), o.dataset.size, { auto: "auto (the model picks)" });
    const qs = list(o.dataset.qualities);
    qualityField.hidden = qs.length === 0;
    fillSelect(quality, [""].concat(qs), "");
    fillSelect(format, list(o.dataset.formats), list(o.dataset.formats)[0]);
    n.max = o.dataset.max;
    if (parseInt(n.value, 10) > parseInt(o.dataset.max, 10)) n.value = o.dataset.max;
    rf.value = o.dataset.rf;
  };
  model.addEventListener("change", pick);
  pick();

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    send.disabled = true;
    gallery.replaceChildren();
    status.textContent = "Generating…";
    const body = {
      account: form.elements.account.value,
      model: model.value,
      prompt: form.elements.prompt.value,
      n: parseInt(n.value, 10) || 1,
      size: size.value,
      output_format: format.value,
      response_format: rf.value,
    };
    if (!qualityField.hidden && quality.value) body.quality = quality.value;
    const t0 = performance.now();
    try {
      const res = await post("/console/playground/image", body);
      if (!res.ok) throw new Error(await errorOf(res));
      const r = await res.json();
      const type = IMAGE_TYPES[r.output_format] || "image/png";
      let shown = 0;
      (r.data || []).forEach((d, i) => {
        const src = d.b64_json ? "data:" + type + ";base64," + d.b64_json : safeURL(d.url) ? d.url : "";
        if (!src) return;
        const fig = el("figure");
        const img = el("img");
        img.alt = "Image " + (i + 1) + " of " + r.data.length + ": " + body.prompt;
        img.src = src;
        const a = el("a", d.b64_json ? "Download" : "Open our link");
        a.href = src;
        if (d.b64_json) a.download = "image-" + (i + 1) + "." + r.output_format;
        const cap = el("figcaption");
        cap.append(a);
        fig.append(img, cap);
        gallery.append(fig);
        shown++;
      });
      let msg = shown + (shown === 1 ? " image" : " images") + " from " + r.model + ", " + (r.size || body.size) + ", " + r.output_format;
      if (r.quality) msg += ", quality " + r.quality;
      msg += " (" + (hasBytes(r) ? "as b64_json" : "as our links") + "), in " + ms(performance.now() - t0) + ".";
      if (r.usage && r.usage.total_tokens) msg += " " + r.usage.total_tokens + " tokens.";
      status.textContent = msg;
    } catch (err) {
      status.replaceChildren(el("span", "Error: " + err.message, "error"));
    } finally {
      send.disabled = false;
    }
  });
}

// hasBytes reports whether an images answer carries the bytes (b64_json).
function hasBytes(r) {
  return !!(r.data && r.data[0] && r.data[0].b64_json);
}

// appendBuffer appends chunk to the MediaSource buffer sb and waits until
// it is taken. A full buffer (QuotaExceededError) is made room in: the
// audio already played is removed, or, if none, it waits for playback to
// move on (a bounded number of times).
async function appendBuffer(sb, audio, chunk) {
  const settled = () =>
    new Promise((resolve, reject) => {
      const done = () => {
        sb.removeEventListener("error", fail);
        resolve();
      };
      const fail = () => {
        sb.removeEventListener("updateend", done);
        reject(new Error("the browser could not take the audio"));
      };
      sb.addEventListener("updateend", done, { once: true });
      sb.addEventListener("error", fail, { once: true });
    });
  for (let i = 0; ; i++) {
    try {
      const p = settled();
      sb.appendBuffer(chunk);
      return await p;
    } catch (err) {
      if (err.name !== "QuotaExceededError" || i >= QUOTA_RETRIES) throw err;
    }
    const played = audio.currentTime - 5;
    if (sb.buffered.length > 0 && played > sb.buffered.start(0)) {
      const p = settled();
      sb.remove(sb.buffered.start(0), played);
      await p;
    } else {
      await new Promise((r) => setTimeout(r, QUOTA_WAIT_MS));
    }
  }
}

function setupSpeech(form) {
  const model = form.elements.model;
  const voice = form.elements.voice;
  const format = form.elements.response_format;
  const input = form.elements.input;
  const status = document.getElementById("speech-status");
  const player = document.getElementById("speech-player");
  const send = document.getElementById("speech-send");
  let urls = [];

  const pick = () => {
    const o = model.selectedOptions[0];
    if (!o) return;
    const vs = list(o.dataset.voices);
    // A model whose default voice is not one of its names (a vendor's
    // voice id) offers it as "model default".
    fillSelect(voice, o.dataset.voice ? vs : [""].concat(vs), o.dataset.voice || "");
    fillSelect(format, list(o.dataset.formats), "mp3");
    input.maxLength = parseInt(o.dataset.max, 10) || 4096;
  };
  model.addEventListener("change", pick);
  pick();

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    send.disabled = true;
    for (const u of urls) URL.revokeObjectURL(u);
    urls = [];
    player.replaceChildren();
    delete player.dataset.firstByteMs;
    status.textContent = "Waiting for the first audio…";
    const body = { account: form.elements.account.value, model: model.value, input: input.value, response_format: format.value };
    if (voice.value) body.voice = voice.value;
    const t0 = performance.now();
    let first = 0;
    let playing = 0;
    let bytes = 0;
    let pieces = 0;
    let blocked = false; // the browser would not start playing
    let began = false; // the answer is audio: a failure now cuts it short
    // The player and its MediaSource are made before the request, so
    // that the source is open when the first audio arrives.
    const audio = el("audio");
    audio.controls = true;
    audio.id = "speech-audio";
    const mse = body.response_format === "mp3" && window.MediaSource && MediaSource.isTypeSupported("audio/mpeg");
    let source = null;
    let opened = null;
    if (mse) {
      source = new MediaSource();
      opened = new Promise((r) => source.addEventListener("sourceopen", r, { once: true }));
      const u = URL.createObjectURL(source);
      urls.push(u);
      audio.src = u;
    }
    // The status: what happened so far, and when the audio began to
    // play (which may be after the last byte came).
    let said = "";
    const say = (msg) => {
      said = msg;
      status.textContent = msg + (playing ? " Audio playing after " + ms(playing) + "." : "");
    };
    audio.addEventListener("playing", () => {
      if (playing) return;
      playing = performance.now() - t0;
      say(said);
    });
    try {
      const res = await post("/console/playground/speech", body, "audio/*");
      if (!res.ok) throw new Error(await errorOf(res));
      began = true;
      const type = (res.headers.get("Content-Type") || "").split(";")[0].trim();
      player.append(audio);
      const stream = mse && type === "audio/mpeg";
      let sb = null;
      if (stream) {
        await opened;
        sb = source.addSourceBuffer("audio/mpeg");
      }
      audio.dataset.mode = stream ? "stream" : "blob";
      const chunks = [];
      const reader = res.body.getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        if (!first) {
          first = performance.now() - t0;
          say("First audio byte after " + ms(first) + (stream ? "; playing as it streams…" : "; receiving (" + type + " plays at the end)…"));
          player.dataset.firstByteMs = String(Math.round(first));
        }
        chunks.push(value);
        bytes += value.length;
        pieces++;
        if (stream) {
          await appendBuffer(sb, audio, value);
          if (pieces === 1) audio.play().catch(() => (blocked = true));
        }
      }
      if (stream) {
        if (source.readyState === "open") source.endOfStream();
      } else if (type !== "audio/pcm" && audio.canPlayType(type) !== "") {
        const u = URL.createObjectURL(new Blob(chunks, { type: type }));
        urls.push(u);
        audio.src = u;
        audio.play().catch(() => {});
      } else {
        audio.remove();
      }
      const whole = URL.createObjectURL(new Blob(chunks, { type: type }));
      urls.push(whole);
      const dl = el("a", "Download");
      dl.href = whole;
      dl.download = "speech." + (AUDIO_EXT[type] || "bin");
      const p = el("p");
      p.append(dl, " (" + type + ", " + Math.round(bytes / 1024) + " KB)");
      player.append(p);
      let msg = "Done: " + Math.round(bytes / 1024) + " KB in " + pieces + (pieces === 1 ? " piece" : " pieces") + "; first audio byte after " + ms(first) + ", the last after " + ms(performance.now() - t0) + ".";
      if (stream) msg += " Streamed into the player as it came (MediaSource).";
      else if (audio.isConnected) msg += " " + type + " cannot be streamed here: it plays from the whole file.";
      else msg += " A browser cannot play " + type + ": download it.";
      if (blocked) msg += " Press play: the browser did not start it.";
      say(msg);
    } catch (err) {
      status.replaceChildren(el("span", "Error: " + (began ? "the audio was cut short after " + bytes + " bytes (" + err.message + ")" : err.message), "error"));
    } finally {
      send.disabled = false;
    }
  });
}

document.addEventListener("DOMContentLoaded", () => {
  const chatForm = document.getElementById("chat-form");
  if (chatForm) setupChat(chatForm);
  const jobForm = document.getElementById("job-form");
  if (jobForm) setupJob(jobForm);
  const imageForm = document.getElementById("image-form");
  if (imageForm) setupImage(imageForm);
  const speechForm = document.getElementById("speech-form");
  if (speechForm) setupSpeech(speechForm);
});
