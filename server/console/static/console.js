// latch console: live updates. Every page works without this script; with it, a page that
// shows approvals or effects follows the server's event stream and reloads when something it
// shows changes — unless the person is typing a note, in which case it says so instead.
(function () {
  "use strict";
  var marker = document.querySelector("[data-live]");
  if (!marker || !window.EventSource) return;
  var after = marker.getAttribute("data-live") || "0";
  var live = document.getElementById("live");
  var kinds = ["approval_requested", "approval_granted", "approval_denied", "approval_consumed",
    "approval_invalidated", "approval_answered", "execution_committed", "execution_failed",
    "execution_ambiguous", "effect_resolved", "reconcile_resolved", "outcome_conflict"];
  var es = new EventSource("/v1/events?after=" + encodeURIComponent(after));
  function busy() {
    var el = document.activeElement;
    if (el && (el.tagName === "TEXTAREA" || el.tagName === "INPUT") && el.value) return true;
    var ts = document.querySelectorAll("textarea");
    for (var i = 0; i < ts.length; i++) { if (ts[i].value) return true; }
    return false;
  }
  function changed() {
    if (busy()) {
      live.hidden = false;
      live.textContent = "Something changed since this page was drawn. Reload to see it (your note is kept until then).";
      return;
    }
    es.close();
    window.location.reload();
  }
  kinds.forEach(function (k) { es.addEventListener(k, changed); });
  es.addEventListener("error", function () {
    live.hidden = false;
    live.textContent = "Live updates paused; reload to see changes.";
  });
  // Time left counts down.
  setInterval(function () {
    document.querySelectorAll("[data-expires]").forEach(function (el) {
      var left = (Date.parse(el.getAttribute("data-expires")) - Date.now()) / 1000;
      if (left <= 0) { el.textContent = "expired"; return; }
      if (left < 60) { el.textContent = Math.floor(left) + "s left"; return; }
      if (left < 3600) { el.textContent = Math.floor(left / 60) + "m left"; return; }
      if (left < 172800) { el.textContent = Math.floor(left / 3600) + "h " + Math.floor(left % 3600 / 60) + "m left"; return; }
      el.textContent = Math.floor(left / 86400) + "d left";
    });
  }, 1000);
})();
