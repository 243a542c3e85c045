/* kafka-forensics report: findings filters and lazy per-partition drawing.
   All data comes from the JSON block #report-data; text from disk is set with textContent only. */
(function () {
  "use strict";
  var payload = JSON.parse(document.getElementById("report-data").textContent);
  var drawn = {};

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  /* per-partition layouts hold only what differs from the shared base layout */
  function merge(base, diff) {
    var out = {};
    Object.keys(base).forEach(function (k) { out[k] = base[k]; });
    Object.keys(diff).forEach(function (k) {
      var b = base[k], d = diff[k];
      out[k] = b && d && typeof b === "object" && typeof d === "object" && !Array.isArray(b) && !Array.isArray(d) ? merge(b, d) : d;
    });
    return out;
  }
  function fmt(v) { return v === null || v === undefined ? "" : String(v); }

  function table(headers, rows) {
    var t = el("table", null, "grid"), thead = el("thead"), tr = el("tr");
    headers.forEach(function (h) { tr.appendChild(el("th", h)); });
    thead.appendChild(tr); t.appendChild(thead);
    var tbody = el("tbody");
    rows.forEach(function (r) { tbody.appendChild(r); }); t.appendChild(tbody);
    return t;
  }

  function lineageTable(box, lin) {
    box.appendChild(el("h3", "Leader-epoch lineage"));
    if (!lin) { box.appendChild(el("p", "No leader-epoch data for this partition.", "dim")); return; }
    box.appendChild(el("p", "Start offset per epoch as each replica's leader-epoch-checkpoint has it, and the offsets its batches of that epoch span (source: " + lin.source + "). Rows where replicas disagree are shaded; ★ the epoch's leader, by the evidence named under \u201cled by\u201d (the metadata log, the brokers' logs, the earliest checkpoint start, the first batch at that start), or undetermined.", "dim"));
    var EVIDENCE = { metadata_log: "metadata log", broker_log: "broker logs", leader_epoch_checkpoint: "earliest checkpoint start", first_batch: "first batch at the start" };
    var rows = lin.rows.map(function (row) {
      var tr = el("tr", null, row.conflict ? "conflict" : "");
      tr.appendChild(el("td", row.epoch, "num"));
      row.cells.forEach(function (c) {
        if (!c) { tr.appendChild(el("td", "—", "dim")); return; }
        var parts = [];
        if (c.cp !== null) parts.push("start " + c.cp);
        if (c.first !== null) parts.push("batches " + c.first + "–" + fmt(c.last));
        tr.appendChild(el("td", (c.leader ? "★ " : "") + (parts.join(" · ") || "present"), c.leader ? "leader" : ""));
      });
      var by = row.leader === null || row.leader === undefined ? "undetermined"
        : "broker " + row.leader + (row.leader_evidence ? " (" + (EVIDENCE[row.leader_evidence] || row.leader_evidence) + ")" : "");
      tr.appendChild(el("td", by, row.leader === null || row.leader === undefined ? "dim" : ""));
      return tr;
    });
    box.appendChild(table(["epoch"].concat(lin.brokers.map(function (b) { return "broker " + b; })).concat(["led by"]), rows));
  }

  var REPLICA_COLS = [["broker", "broker"], ["log_dir", "log dir"], ["dir_state", "state"], ["log_start_offset", "log start"], ["hw_checkpoint", "HW ckpt"],
    ["recovery_point", "recovery pt"], ["leo", "LEO"], ["first_epoch", "first epoch"], ["last_epoch", "last epoch"], ["segments", "segments"],
    ["records", "records"], ["bytes", "bytes"], ["clean_shutdown", "clean shutdown"], ["compacted", "compacted"]];

  function replicaTable(box, reps) {
    box.appendChild(el("h3", "Replicas"));
    if (!reps || !reps.length) { box.appendChild(el("p", "No replica_logs rows for this partition.", "dim")); return; }
    var rows = reps.map(function (r) {
      var tr = el("tr");
      REPLICA_COLS.forEach(function (c) { var v = r[c[0]]; tr.appendChild(el("td", v === true ? "yes" : v === false ? "no" : fmt(v), typeof v === "number" ? "num" : "")); });
      return tr;
    });
    box.appendChild(table(REPLICA_COLS.map(function (c) { return c[1]; }), rows));
  }

  /* incident timeline: first EVENTS_SHOWN rows plus every highlighted row, the rest behind a toggle */
  var EVENTS_SHOWN = 50;
  var EVENT_HEADERS = ["time (UTC)", "source", "node", "event", "leader / epoch", "ISR", "offset", "detail", "evidence"];
  function eventsTable(box, ev) {
    var F = {};
    (payload.event_fields || []).forEach(function (name, i) { F[name] = i; });
    var paths = payload.paths || [], rows = ev.rows;
    box.appendChild(el("h3", "Timeline"));
    var note = rows.length + " event" + (rows.length === 1 ? "" : "s") + " in time order (unknown times last)" +
      (ev.alarming ? "; " + ev.alarming + " alarming, highlighted" : "") +
      (ev.omitted ? "; " + ev.omitted + " routine events not embedded (see tables/timeline)" : "") + ".";
    box.appendChild(el("p", note, "dim"));
    var t = table(EVENT_HEADERS, []), tbody = t.querySelector("tbody");
    t.classList.add("events");
    box.appendChild(t);
    function row(r) {
      var hl = r[F.highlight], tr = el("tr", null, hl ? "ev sev-" + hl : "ev");
      if (hl) tr.setAttribute("data-severity", hl);
      [F.time, F.source, F.node, F.event, F.leader_epoch, F.isr, F.offset, F.detail].forEach(function (i) {
        var td = tr.appendChild(el("td", r[i], i === F.node || i === F.offset ? "num" : i === F.event ? "evname" : i === F.detail ? "detail" : ""));
        if (i === F.detail && r[i]) td.title = r[i];  /* the whole log line on hover too, wherever the cell wraps */
      });
      var cell = el("td", null, "evidence"), pi = r[F.path];
      if (pi !== null && pi !== undefined) cell.appendChild(el("code", paths[pi] + (r[F.position] === null ? "" : ":" + r[F.position])));
      tr.appendChild(cell);
      return tr;
    }
    function gap(n) {
      var tr = el("tr", null, "gap"), td = el("td", "… " + n + " event" + (n === 1 ? "" : "s") + " hidden", "dim");
      td.colSpan = EVENT_HEADERS.length; tr.appendChild(td);
      return tr;
    }
    function fill(all) {
      tbody.textContent = "";
      var hidden = 0;
      rows.forEach(function (r, i) {
        if (all || i < EVENTS_SHOWN || r[F.highlight]) {
          if (hidden) { tbody.appendChild(gap(hidden)); hidden = 0; }
          tbody.appendChild(row(r));
        } else hidden++;
      });
      if (hidden) tbody.appendChild(gap(hidden));
    }
    fill(false);
    if (rows.length > EVENTS_SHOWN) {
      var all = false, btn = el("button", "show all " + rows.length + " events", "show-all");
      btn.type = "button";
      btn.addEventListener("click", function () {
        all = !all; fill(all);
        btn.textContent = all ? "show the first " + EVENTS_SHOWN + " and highlighted events" : "show all " + rows.length + " events";
      });
      box.appendChild(btn);
    }
  }

  /* clean partitions' payloads: one gzip blob (base64), unpacked once, when the first is opened */
  var unpacking = null;
  function partitionData(key, done) {
    if (payload.partitions[key] || !payload.packed) { done(payload.partitions[key] || {}); return; }
    if (!unpacking) {
      unpacking = ("DecompressionStream" in window) ? (function () {
        var bin = atob(payload.packed), bytes = new Uint8Array(bin.length);
        for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
        var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
        return new Response(stream).text().then(function (t) {
          var more = JSON.parse(t);
          Object.keys(more).forEach(function (k) { payload.partitions[k] = more[k]; });
          payload.packed = null;
        });
      })() : Promise.reject(new Error("this browser cannot unpack the clean partitions (no DecompressionStream)"));
    }
    unpacking.then(function () { done(payload.partitions[key] || {}); }, function (err) { done({ error: String(err.message || err) }); });
  }

  function draw(details) {
    var key = details.getAttribute("data-key");
    if (!key || drawn[key]) return;
    drawn[key] = true;
    partitionData(key, function (p) { drawPartition(details, p); });
  }

  function drawPartition(details, p) {
    var body = details.querySelector(".partition-body");
    if (p.error) { body.appendChild(el("p", p.error, "dim")); details.setAttribute("data-drawn", "error"); return; }
    var tl = body.appendChild(el("div", null, "timeline"));
    var evs = p.events ? body.appendChild(el("div", null, "events")) : null;
    var lin = body.appendChild(el("div", null, "lineage"));
    var reps = body.appendChild(el("div", null, "replicas"));
    if (p.timeline && window.Plotly) {
      var styles = payload.trace_styles || {};
      var traces = p.timeline.data.map(function (t) { return styles[t.name] && !t.type ? merge(styles[t.name], t) : t; });
      Plotly.newPlot(tl, traces, merge(payload.base_layout || {}, p.timeline.layout || {}), { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["select2d", "lasso2d"] });
    } else {
      tl.appendChild(el("p", "No replica or offset-range data for this partition.", "dim"));
    }
    if (evs) eventsTable(evs, p.events);
    lineageTable(lin, p.lineage);
    replicaTable(reps, p.replicas);
    details.setAttribute("data-drawn", "true");
  }

  var observer = "IntersectionObserver" in window ? new IntersectionObserver(function (entries) {
    entries.forEach(function (e) { if (e.isIntersecting && e.target.open) { observer.unobserve(e.target); draw(e.target); } });
  }, { rootMargin: "600px 0px" }) : null;

  document.querySelectorAll("details.partition[data-key]").forEach(function (d) {
    d.addEventListener("toggle", function () { if (d.open) draw(d); });
    if (d.open) { if (observer) observer.observe(d); else draw(d); }
  });

  function reveal(id) {
    var target = document.getElementById(id);
    if (!target) return;
    for (var n = target; n; n = n.parentElement) { if (n.tagName === "DETAILS") n.open = true; }
    if (target.hasAttribute("data-key")) draw(target);
    target.scrollIntoView({ block: "start" });
  }
  document.querySelectorAll("a.partition-link").forEach(function (a) {
    a.addEventListener("click", function (ev) { ev.preventDefault(); history.replaceState(null, "", "#" + a.getAttribute("data-target")); reveal(a.getAttribute("data-target")); });
  });
  if (location.hash.length > 1) reveal(decodeURIComponent(location.hash.slice(1)));

  /* findings filters */
  var items = Array.prototype.slice.call(document.querySelectorAll("#findings-list li.finding"));
  var toggles = Array.prototype.slice.call(document.querySelectorAll("button.sev-toggle"));
  var kindSel = document.getElementById("filter-kind"), topicSel = document.getElementById("filter-topic"), textBox = document.getElementById("filter-text");
  var counter = document.getElementById("findings-count"), empty = document.getElementById("findings-empty");
  function apply() {
    var on = {};
    toggles.forEach(function (b) { on[b.getAttribute("data-severity")] = b.getAttribute("aria-pressed") === "true"; });
    var kind = kindSel ? kindSel.value : "", topic = topicSel ? topicSel.value : "", q = textBox ? textBox.value.trim().toLowerCase() : "";
    var shown = 0;
    items.forEach(function (li) {
      var ok = on[li.getAttribute("data-severity")] !== false && (!kind || li.getAttribute("data-kind") === kind) &&
        (!topic || li.getAttribute("data-topic") === topic) && (!q || li.textContent.toLowerCase().indexOf(q) >= 0);
      li.hidden = !ok;
      if (ok) shown++;
    });
    if (counter) counter.textContent = shown + " of " + items.length + " findings";
    if (empty) empty.hidden = shown !== 0;
  }
  toggles.forEach(function (b) { b.addEventListener("click", function () { b.setAttribute("aria-pressed", b.getAttribute("aria-pressed") === "true" ? "false" : "true"); apply(); }); });
  [kindSel, topicSel].forEach(function (s) { if (s) s.addEventListener("change", apply); });
  if (textBox) textBox.addEventListener("input", apply);
  apply();
})();
