// latch console: live updates. Every page works without this script; with it, a page that
// shows approvals or effects follows the server's event stream and reloads when something it
// shows changes — unless the person is typing a note, in which case it says so instead.
(function () {
  "use strict";
  var marker = document.querySelector("[data-live]");
  if (!marker || !window.EventSource) return;
  var after = marker.getAttribute("data-live") || "0";
  var live = document.getElementById("live");
  // The page names the event kinds that change what it shows.
  var kinds = (marker.getAttribute("data-kinds") || "").split(" ").filter(Boolean);
  var es = new EventSource("/v1/events?after=" + encodeURIComponent(after));
  function busy() {
    var el = document.activeElement;
    if (el && (el.tagName === "TEXTAREA" || el.tagName === "INPUT") && el.value) return true;
    var ts = document.querySelectorAll("textarea");
    for (var i = 0; i < ts.length; i++) { if (ts[i].value) return true; }
    return false;
  }
  // A form being sent is the person's own change: its answer is the next page, and a redraw
  // started now would race it (the answer's own events arrive before it loads).
  var sending = false;
  document.addEventListener("submit", function () { sending = true; es.close(); });
  function changed() {
    if (sending) return;
    if (busy()) {
      live.hidden = false;
      live.textContent = "Something changed since this page was drawn. Reload to see it (your note is kept until then).";
      return;
    }
    es.close();
    // From where the page is read: a page drawn as a form's answer (a refusal) would send the
    // form again if reloaded.
    var url = marker.getAttribute("data-url");
    if (url) window.location.replace(url); else window.location.reload();
  }
  kinds.forEach(function (k) { es.addEventListener(k, changed); });
  // Needs attention also lists effects whose lease lapsed without an outcome, which no event
  // announces: the page redraws when the earliest lease it knows of lapses — of the effects
  // executing when it was drawn, and of those reserved since. A lease is measured from the
  // event that set it, on the server's clock, so the browser's clock does not matter.
  if (marker.hasAttribute("data-lapse")) {
    var timer = null, due = Infinity;
    var lapseIn = function (seconds) {
      if (!(seconds > 0)) return;
      var at = Date.now() + seconds * 1000 + 1000;
      if (at >= due) return;
      due = at;
      clearTimeout(timer);
      timer = setTimeout(changed, at - Date.now());
    };
    lapseIn(parseFloat(marker.getAttribute("data-lapse")));
    es.addEventListener("effect_reserved", function (m) {
      try {
        var e = JSON.parse(m.data);
        var lease = e.payload && e.payload.lease_expires_at;
        if (lease && e.at) lapseIn((Date.parse(lease) - Date.parse(e.at)) / 1000);
      } catch (err) { /* an event it cannot read changes nothing it shows */ }
    });
  }
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
