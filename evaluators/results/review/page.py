"""The review app's one page: markup, style and script, all constant; the data comes from the JSON API.

Nothing recorded is ever put in this page's text: the script fetches JSON (with the access token
from the URL's fragment, which browsers never send to a server) and sets every value as DOM text.
The one exception is a trace's tree, HTML the server made with the report's escaping (`trees.py`).
The Content-Security-Policy allows this script by its hash, inline styles, and fetches to the app
itself only; no inline event handler can run (none is allowed by a hash-only `script-src`).

Keys: j/k or the arrows move in the entry list, Enter opens; in an entry, t picks the next thing
to label (the entry's outcome, then each judge score), p labels it pass, f fail, n writes a note,
Escape goes back to the list.
"""

from __future__ import annotations

import base64
import hashlib

from evaltrace.evaluators.results.report.trees import STYLE

_STYLE = (
    STYLE
    + """
main{max-width:none;display:grid;grid-template-columns:minmax(320px,38%) 1fr;gap:16px}
#side{position:sticky;top:0;align-self:start;max-height:100vh;overflow:auto}
#entries{width:100%}#entries tr{cursor:pointer}#entries tr.sel{outline:2px solid #1f6feb}
#entries tr[data-failed="1"] td:first-child{color:#c62828;font-weight:600}
.target{border:1px solid #d8dde3;border-radius:6px;padding:6px 8px;margin:6px 0;background:#fff}
.target.sel{border-color:#1f6feb;box-shadow:0 0 0 2px #1f6feb33}
.target button{margin-left:6px}.given{font-weight:600}.given.pass{color:#1a7f37}.given.fail{color:#c62828}
#note{width:100%;min-height:40px}.keys{color:#57606a;font-size:12px}
"""
)

SCRIPT = r"""
(function () {
  "use strict";
  var token = new URLSearchParams(location.hash.slice(1)).get("token") || "";
  var $ = function (id) { return document.getElementById(id); };
  var state = { source: "", entries: [], at: -1, entry: null, targets: [], target: 0, loads: 0 };
  function api(path, body) {
    var init = { headers: { "X-Evaltrace-Token": token } };
    if (body !== undefined) {
      init.method = "POST"; init.body = JSON.stringify(body);
      init.headers["Content-Type"] = "application/json";
    }
    return fetch(path, init).then(function (r) {
      return r.json().then(function (data) {
        if (!r.ok) { throw new Error(data.error || ("HTTP " + r.status)); }
        return data;
      });
    });
  }
  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    if (cls) { e.className = cls; }
    return e;
  }
  function status(message) { $("status").textContent = message; }
  function loadSources() {
    return api("/api/sources").then(function (data) {
      var select = $("source");
      select.replaceChildren();
      data.sources.forEach(function (s) { var o = el("option", s.title); o.value = s.id; select.appendChild(o); });
      state.source = select.value;
      return loadEntries();
    }).catch(function (e) { status(e.message); });
  }
  function query() {
    var q = new URLSearchParams({ source: state.source, scorer: $("f-scorer").value,
      "case": $("f-case").value, tier: $("f-tier").value, failed: $("f-failed").checked ? "1" : "" });
    return q.toString();
  }
  function loadEntries() {
    // Filters changed in quick succession send several requests whose answers may arrive out of
    // order: only the latest request's answer is shown, so a stale list never replaces a newer one.
    var mine = ++state.loads;
    return api("/api/entries?" + query()).then(function (data) {
      if (mine !== state.loads) { return; }
      state.entries = data.entries; state.at = data.entries.length ? 0 : -1;
      var body = $("entries-body");
      body.replaceChildren();
      data.entries.forEach(function (e, i) {
        var row = document.createElement("tr");
        row.setAttribute("data-index", String(e.index));
        row.setAttribute("data-failed", e.failed ? "1" : "0");
        row.appendChild(el("td", e.status));
        row.appendChild(el("td", e.case_id || (e.samples[0] ? e.samples[0].trace_id : "")));
        row.appendChild(el("td", e.tier));
        row.appendChild(el("td", e.fails.join(" ")));
        row.addEventListener("click", function () { state.at = i; mark(); openEntry(); });
        body.appendChild(row);
      });
      $("shown").textContent = String(data.entries.length);
      mark();
    }).catch(function (e) { status(e.message); });
  }
  function mark() {
    var rows = $("entries-body").children;
    for (var i = 0; i < rows.length; i++) { rows[i].classList.toggle("sel", i === state.at); }
    if (state.at >= 0 && rows[state.at]) { rows[state.at].scrollIntoView({ block: "nearest" }); }
  }
  function openEntry() {
    var chosen = state.entries[state.at];
    if (!chosen) { return; }
    api("/api/entry?" + new URLSearchParams({ source: state.source, index: String(chosen.index) }))
      .then(showEntry).catch(function (e) { status(e.message); });
  }
  function labelLine(given) {
    if (!given) { return el("span", "not labelled", "note"); }
    var s = el("span", "labelled " + given.label + " by " + given.author + (given.note ? ": " + given.note : ""),
      "given " + given.label);
    return s;
  }
  function targetBox(sample, scorer, title, score) {
    var box = el("div", undefined, "target");
    box.appendChild(el("span", title, "kind"));
    if (score) {
      box.appendChild(el("span", score.passed === null ? "n/a" : (score.passed ? "pass" : "fail"),
        "chip " + (score.passed ? "passed" : "failed")));
      box.appendChild(el("div", score.error || score.reason || "", "reason"));
    }
    var t = { sample: sample, scorer: scorer, box: box };
    ["pass", "fail"].forEach(function (verdict) {
      var b = el("button", verdict === "pass" ? "Pass (p)" : "Fail (f)");
      b.className = "label-" + verdict;
      b.addEventListener("click", function () { select(t); give(verdict); });
      box.appendChild(b);
    });
    var line = el("div"); line.className = "given-line";
    line.appendChild(labelLine(sample.labels[scorer]));
    box.appendChild(line);
    box.addEventListener("click", function () { select(t); });
    state.targets.push(t);
    return box;
  }
  function select(t) { state.target = state.targets.indexOf(t); markTarget(); }
  function markTarget() {
    state.targets.forEach(function (t, i) { t.box.classList.toggle("sel", i === state.target); });
  }
  function showEntry(entry) {
    state.entry = entry; state.targets = []; state.target = 0;
    var pane = $("detail");
    pane.replaceChildren();
    pane.appendChild(el("h2", (entry.case_id || "trace") + " · " + entry.status));
    entry.samples.forEach(function (sample) {
      var section = el("section");
      section.appendChild(el("h3", "sample " + sample.sample_index + " · trace " + sample.trace_id));
      var outcome = entry.status === "passed" ? true : (entry.failed ? false : null);
      section.appendChild(targetBox(sample, "", "entry outcome", { passed: outcome, reason: "" }));
      sample.scores.forEach(function (score) {
        if (score.judge) { section.appendChild(targetBox(sample, score.scorer, "judge " + score.scorer, score)); }
        else {
          var verdict = score.passed === null ? "n/a" : (score.passed ? "pass" : "fail");
          var line = el("div", score.scorer + ": " + verdict);
          line.appendChild(el("div", score.error || score.reason || "", "reason note"));
          section.appendChild(line);
        }
      });
      var tree = el("div", undefined, "trace-tree");
      if (sample.tree) { tree.innerHTML = sample.tree; }  // the report's tree: every recorded text escaped
      else { tree.appendChild(el("p", "trace not found in the span files", "note")); }
      section.appendChild(tree);
      pane.appendChild(section);
    });
    markTarget();
    status("");
  }
  function give(verdict) {
    var t = state.targets[state.target];
    if (!t || !state.entry) { return; }
    var body = { run_id: state.entry.run_id, case_id: state.entry.case_id, trace_id: t.sample.trace_id,
      scorer: t.scorer, label: verdict, note: $("note").value };
    api("/api/labels", body).then(function (data) {
      t.sample.labels[t.scorer] = data.label;
      var line = t.box.querySelector(".given-line");
      line.replaceChildren(labelLine(data.label));
      $("note").value = "";
      status("saved: " + verdict);
    }).catch(function (e) { status("not saved: " + e.message); });
  }
  document.addEventListener("keydown", function (event) {
    var typing = event.target && (event.target.tagName === "INPUT" || event.target.tagName === "TEXTAREA" ||
      event.target.tagName === "SELECT");
    if (event.key === "Escape") { if (typing) { event.target.blur(); } return; }
    if (typing || event.ctrlKey || event.metaKey || event.altKey) { return; }
    var key = event.key;
    if ((key === "j" || key === "ArrowDown") && state.at < state.entries.length - 1) { state.at++; mark(); }
    else if ((key === "k" || key === "ArrowUp") && state.at > 0) { state.at--; mark(); }
    else if (key === "Enter" || key === "o") { openEntry(); }
    else if (key === "t" && state.targets.length) {
      state.target = (state.target + 1) % state.targets.length; markTarget();
    }
    else if (key === "p") { give("pass"); }
    else if (key === "f") { give("fail"); }
    else if (key === "n") { $("note").focus(); }
    else { return; }
    event.preventDefault();
  });
  $("source").addEventListener("change", function () { state.source = $("source").value; loadEntries(); });
  ["f-failed", "f-scorer", "f-case", "f-tier"].forEach(function (id) {
    $(id).addEventListener("change", loadEntries);
  });
  loadSources();
})();
"""

SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()

CSP = (
    f"default-src 'none'; script-src '{SCRIPT_HASH}'; style-src 'unsafe-inline'; connect-src 'self'; "
    "img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""The page's script by its hash, inline styles, fetches to the app itself; nothing else."""

PAGE = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>evaltrace review</title>
<style>{_STYLE}</style>
</head>
<body>
<main>
<div id="side">
<h1>evaltrace review</h1>
<label>Source <select id="source"></select></label>
<div class="filters">
<label><input type="checkbox" id="f-failed"> failed only</label>
<label>scorer <input id="f-scorer" size="12"></label>
<label>case <input id="f-case" size="10"></label>
<label>tier <input id="f-tier" size="6"></label>
</div>
<p><span id="shown">0</span> entries · <span id="status" class="note"></span></p>
<table id="entries"><thead><tr><th>status</th><th>case</th><th>tier</th><th>failed scorers</th></tr></thead>
<tbody id="entries-body"></tbody></table>
<p><label>Note for the next label (n)<br><textarea id="note"></textarea></label></p>
<p class="keys">j/k move · Enter open · t next target · p pass · f fail · n note · Esc leave the note</p>
</div>
<div id="detail"><p class="note">Open an entry (click it, or Enter).</p></div>
</main>
<script>{SCRIPT}</script>
</body>
</html>
"""
"""The whole page: constant (no data in it)."""
