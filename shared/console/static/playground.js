// Genway console, playground: a chat that streams its answer as it
// arrives (fetch and a ReadableStream over the console's Server-Sent
// Events), and a job form that follows its job to the end and plays the
// result. Everything from the server or the model goes in as text.
"use strict";

const MAX_IMAGE_BYTES = 5 << 20;
const JOB_POLL_MS = 1000;
const JOB_POLL_LIMIT = 900; // polls: 15 minutes

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

document.addEventListener("DOMContentLoaded", () => {
  const chatForm = document.getElementById("chat-form");
  if (chatForm) setupChat(chatForm);
  const jobForm = document.getElementById("job-form");
  if (jobForm) setupJob(jobForm);
});
