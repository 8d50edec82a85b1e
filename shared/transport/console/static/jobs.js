// Genway console, jobs pages: the list refreshes itself in place from
// /console/jobs.json (same filters) every few seconds, and a job's page
// reloads when its job moves on. Data goes into the page as text only.
"use strict";

const POLL_MS = 2500;
const STATUSES = ["queued", "processing", "completed", "failed"];

// getJSON fetches url as JSON; it throws on a status other than 200.
async function getJSON(url) {
  const res = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
  if (!res.ok) throw new Error(res.status + " " + res.statusText);
  return res.json();
}

// el makes an element with text (never markup) and an optional class.
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

// statusBadge is a job status as the tables show it.
function statusBadge(status) {
  const s = el("span", status, "status");
  if (STATUSES.includes(status)) s.classList.add("status-" + status);
  return s;
}

// jobRow is one row of the jobs table, as the server renders it.
function jobRow(j) {
  const tr = document.createElement("tr");
  const id = el("td");
  const a = el("a");
  a.href = "/console/jobs/" + encodeURIComponent(j.id);
  a.append(el("code", j.id));
  id.append(a);
  const model = el("td");
  model.append(el("code", j.model));
  if (j.served_by && j.served_by !== j.model) {
    // Completed by one of the model's fallbacks.
    model.append(" → ", el("code", j.served_by));
  }
  const status = el("td");
  status.append(statusBadge(j.status));
  tr.append(id, el("td", j.account), el("td", j.type), model, status, el("td", j.price, "num"), el("td", j.created), el("td", j.prompt));
  return tr;
}

// pollList keeps the jobs table current.
function pollList(live) {
  const body = document.querySelector("#jobs-table tbody");
  const next = document.getElementById("jobs-next");
  const note = live.textContent;
  const tick = async () => {
    if (!document.hidden) {
      try {
        const data = await getJSON(live.dataset.live + location.search);
        if (data.jobs.length > 0) {
          body.replaceChildren(...data.jobs.map(jobRow));
        } else {
          const td = el("td", "No jobs.");
          td.colSpan = 8;
          const tr = document.createElement("tr");
          tr.append(td);
          body.replaceChildren(tr);
        }
        next.hidden = !data.next;
        if (data.next) next.href = data.next;
        live.textContent = note + " Updated " + new Date().toLocaleTimeString() + ".";
      } catch (e) {
        live.textContent = note + " Refresh failed (" + e.message + "); retrying.";
      }
    }
    setTimeout(tick, POLL_MS);
  };
  setTimeout(tick, POLL_MS);
}

// pollJob reloads a job's page when its status changes.
function pollJob(job) {
  const tick = async () => {
    try {
      const s = await getJSON("/console/jobs/" + encodeURIComponent(job.dataset.id) + "/status");
      if (s.status !== job.dataset.status) {
        location.reload();
        return;
      }
    } catch {
      // try again
    }
    setTimeout(tick, POLL_MS);
  };
  setTimeout(tick, POLL_MS);
}

document.addEventListener("DOMContentLoaded", () => {
  const live = document.getElementById("jobs-live");
  if (live && live.dataset.live) pollList(live);
  const job = document.getElementById("job");
  if (job && (job.dataset.status === "queued" || job.dataset.status === "processing")) pollJob(job);
});
