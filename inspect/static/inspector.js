// stategate inspector: keeps the page up to date (server-sent events),
// shows times in the browser's time zone, asks before a reset, and keeps
// an approval's comment being written across updates.
(function () {
  "use strict";
  var main = document.getElementById("main");
  var live = document.getElementById("live");
  var workflow = main.dataset.workflow, handle = main.dataset.handle;
  var busy = false, again = false;

  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function local(d) {
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
  }
  function span(ms) {
    var s = Math.round(Math.abs(ms) / 1000);
    if (s < 60) return s + " s";
    var m = Math.floor(s / 60);
    if (m < 60) return m + " min " + (s % 60) + " s";
    var h = Math.floor(m / 60);
    if (h < 48) return h + " h " + (m % 60) + " min";
    return Math.floor(h / 24) + " days";
  }
  // Times: "2025-01-02 14:03:12 (5 s ago)"; timers: "due in 29 min 58 s (at …)".
  function times() {
    var now = Date.now();
    document.querySelectorAll("time[datetime]").forEach(function (t) {
      var iso = t.getAttribute("datetime");
      if (!iso) return;
      var d = new Date(iso);
      if (isNaN(d)) return;
      var diff = d.getTime() - now;
      if (t.classList.contains("due")) {
        t.textContent = diff > 0 ? "due in " + span(diff) + " (at " + local(d).slice(11) + ")" : "due now (firing)";
      } else {
        t.textContent = local(d) + " (" + (diff > -1000 ? "just now" : span(diff) + " ago") + ")";
      }
      t.title = d.toString();
    });
  }

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    var url = location.pathname + "?fragment=1";
    fetch(url, { credentials: "same-origin", cache: "no-store" }).then(function (r) {
      if (r.status === 404) { location.reload(); return; }
      if (r.status === 401) {
        // The token cookie is no longer good (the server restarted).
        live.className = "live off";
        live.textContent = "signed out: open this page again with ?token=TOKEN";
        return;
      }
      if (!r.ok) throw new Error(r.status);
      return r.text().then(function (html) {
        var before = {};
        main.querySelectorAll("tr[data-version]").forEach(function (tr) { before[tr.dataset.version] = true; });
        // An operator's comment being written survives the update (the
        // form of the same waiting call gets it back, with the focus).
        var typed = {}, focused = null;
        main.querySelectorAll("form.approve").forEach(function (f) {
          var c = f.elements.comment, id = f.elements.call.value;
          typed[id] = c.value;
          if (document.activeElement === c) focused = id;
        });
        main.innerHTML = html;
        main.querySelectorAll("form.approve").forEach(function (f) {
          var id = f.elements.call.value;
          if (typed[id]) f.elements.comment.value = typed[id];
          if (focused === id) f.elements.comment.focus();
        });
        main.querySelectorAll("tr[data-version]").forEach(function (tr) {
          if (Object.keys(before).length && !before[tr.dataset.version]) tr.classList.add("flash");
        });
        times();
        main.dataset.updated = String(Date.now());
      });
    }).catch(function () { /* the next event tries again */ }).then(function () {
      // Under load, changes come faster than pages need: at most four
      // refetches a second, each showing all that changed before it.
      setTimeout(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      }, 250);
    });
  }

  function concerns(m) {
    if (m.kind !== "instance") return true; // a reload may change any page
    if (workflow && m.workflow !== workflow) return false;
    if (handle && m.handle !== handle) return false;
    return true;
  }

  // The event stream: EventSource comes back by itself when the server
  // ends a stream (after the delay the server told it), but gives up on
  // an answer that is not a stream (503, 401): then it is opened again
  // 10 s later.
  var opened = false;
  function connect() {
    if (!window.EventSource) { live.textContent = "not live (reload the page to update)"; return; }
    var es = new EventSource("/inspect/_/events");
    es.onopen = function () {
      live.className = "live on"; live.textContent = "live";
      if (opened) refresh(); // changes made while the stream was down
      opened = true;
    };
    es.onerror = function () {
      live.className = "live off"; live.textContent = "reconnecting…";
      if (es.readyState === EventSource.CLOSED) {
        es.close();
        setTimeout(connect, 10000);
        refresh(); // says so if the page is signed out
      }
    };
    es.onmessage = function (e) {
      var m;
      try { m = JSON.parse(e.data); } catch (_) { return; }
      if (concerns(m)) refresh();
    };
  }

  document.addEventListener("submit", function (e) {
    var f = e.target;
    if (f.dataset && f.dataset.confirm && !window.confirm(f.dataset.confirm)) e.preventDefault();
  });
  times();
  setInterval(times, 1000);
  connect();
})();
