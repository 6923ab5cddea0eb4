// Live updates: every 5 s, reload the page's <main> in place, unless a form field has the
// focus (someone is typing or choosing) or the tab is hidden.
(function () {
  "use strict";
  setInterval(async function () {
    const focused = document.activeElement;
    if (document.hidden || (focused && focused.closest("form"))) return;
    try {
      const answer = await fetch(location.href, { credentials: "same-origin" });
      if (!answer.ok) return;
      const page = new DOMParser().parseFromString(await answer.text(), "text/html");
      const fresh = page.querySelector("main");
      const main = document.querySelector("main");
      if (fresh && main) main.replaceWith(fresh);
    } catch (_) {
      // The dashboard restarting: try again at the next tick.
    }
  }, 5000);
})();

// Actions that cannot be undone ask first.
document.addEventListener("submit", function (event) {
  const question = event.target.dataset && event.target.dataset.confirm;
  if (question && !window.confirm(question)) event.preventDefault();
});
