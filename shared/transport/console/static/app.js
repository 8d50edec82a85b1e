// Genway console: the little behaviour pages need, with no inline script
// (the Content-Security-Policy forbids it). Each feature hooks onto data-*
// attributes; page scripts (playground.js, jobs.js) add their own.
"use strict";

// csrfToken is the session's CSRF token, for fetch requests.
function csrfToken() {
  const m = document.querySelector('meta[name="csrf-token"]');
  return m ? m.content : "";
}

document.addEventListener("DOMContentLoaded", () => {
  // A form with data-confirm asks first (revoking a key).
  for (const f of document.querySelectorAll("form[data-confirm]")) {
    f.addEventListener("submit", (e) => {
      if (!window.confirm(f.dataset.confirm)) e.preventDefault();
    });
  }
  // A button with data-copy copies the text of the element it names.
  for (const b of document.querySelectorAll("button[data-copy]")) {
    b.addEventListener("click", async () => {
      const el = document.getElementById(b.dataset.copy);
      const done = document.querySelector('[data-copied="' + b.dataset.copy + '"]');
      try {
        await navigator.clipboard.writeText(el.textContent);
      } catch {
        const r = document.createRange(); // no clipboard (http): select it for Ctrl+C
        r.selectNodeContents(el);
        getSelection().removeAllRanges();
        getSelection().addRange(r);
      }
      if (done) done.hidden = false;
    });
  }
});
