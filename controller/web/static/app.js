// The live page: the topology drawn once from /api/topology, then every state event from
// /api/events restyles it. window.fabricPage exposes the graph and the last state (tests read them).
"use strict";

const STALE_MS = 3000;              // no event for this long: the server is taken as lost
const HOT_QUEUE = 1;                // packets: a queue shown on its link direction
const page = window.fabricPage = { cy: null, state: null, connected: false, topology: null, events: 0 };
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
let selected = null;                // {kind: "link"|"switch", ...}
let lastEventAt = 0;

function loadColour(util) {
  if (util === undefined || util === null) return "#d5d9e0";     // never measured
  if (util < 0.01) return "#b0b7c3";
  const u = Math.min(util, 1);
  // light loads (heartbeats, a few percent) fade in from grey; then green to red at the link's rate
  return `hsl(${Math.round(120 * (1 - u))},${Math.round(75 * Math.min(1, u / 0.15))}%,42%)`;
}

const STYLE = [
  { selector: "node", style: { "label": "data(label)", "font-size": 11, "text-valign": "center", "text-halign": "center",
      "color": "#fff", "text-outline-width": 0, "width": 54, "height": 26, "shape": "round-rectangle",
      "background-color": "#37474f", "border-width": 2, "border-color": "#37474f", "text-wrap": "wrap" } },
  { selector: "node.host", style: { "shape": "ellipse", "width": 44, "height": 20, "background-color": "#78909c",
      "border-color": "#78909c", "font-size": 9 } },
  { selector: "node.tier", style: { "background-opacity": 0, "border-width": 0, "color": "#5b6576", "font-size": 12,
      "text-halign": "left", "events": "no" } },
  { selector: "node.lb-spray", style: { "border-color": "#fbc02d", "border-width": 4 } },
  { selector: "node.lb-flowlet", style: { "border-color": "#26a69a", "border-width": 4 } },
  { selector: "node.disconnected", style: { "background-color": "#9e9e9e" } },
  { selector: "node.failed", style: { "background-color": "#d50000", "border-color": "#d50000" } },
  { selector: "node.aggroot", style: { "border-color": "#1e88e5", "border-width": 6, "border-style": "double" } },
  { selector: "node.selected", style: { "overlay-color": "#00bcd4", "overlay-opacity": 0.3, "overlay-padding": 4 } },
  { selector: "edge", style: { "curve-style": "bezier", "control-point-step-size": 12, "width": 2,
      "line-color": "#d5d9e0", "target-arrow-shape": "triangle", "target-arrow-color": "data(colour)",
      "arrow-scale": 0.6, "font-size": 9, "label": "data(label)", "text-background-color": "#fff",
      "text-background-opacity": 0.85, "text-background-padding": 1, "color": "#1d2430" } },
  { selector: "edge.te", style: { "overlay-color": "#8e24aa", "overlay-opacity": 0.22, "overlay-padding": 3 } },
  { selector: "edge.agg", style: { "underlay-color": "#1e88e5", "underlay-opacity": 0.35, "underlay-padding": 5 } },
  { selector: "edge.watched", style: { "underlay-color": "#00bcd4", "underlay-opacity": 0.55, "underlay-padding": 4 } },
  { selector: "edge.injected", style: { "line-color": "#ff9800", "target-arrow-color": "#ff9800", "line-style": "dotted", "width": 4 } },
  { selector: "edge.paused", style: { "line-style": "dashed", "line-dash-pattern": [6, 3], "target-arrow-shape": "tee",
    "underlay-color": "#6a1b9a", "underlay-opacity": 0.35, "underlay-padding": 4 } },
  { selector: "edge.failed", style: { "line-color": "#d50000", "target-arrow-color": "#d50000", "line-style": "dashed", "width": 5 } },
  { selector: "edge.selected", style: { "overlay-color": "#00bcd4", "overlay-opacity": 0.35, "overlay-padding": 4 } },
];

function draw(topo) {
  page.topology = topo;
  $("fabric-name").textContent = topo.fabric;
  const els = [];
  topo.tiers.forEach((name, t) => els.push({ group: "nodes", classes: "tier", data: { id: `tier:${t}`, label: name },
    position: { x: -70, y: t * 150 }, selectable: false, grabbable: false }));
  for (const n of topo.nodes) {
    els.push({ group: "nodes", classes: n.kind === "host" ? "host" : `switch role-${n.role}`,
      data: { id: n.id, label: n.id, kind: n.kind, role: n.role, group: n.group }, position: { x: n.x, y: n.y } });
  }
  for (const d of topo.directions) {
    els.push({ group: "edges", classes: "dir", data: { id: d.id, source: d.src, target: d.dst, link: d.link,
      port: d.port, label: "", colour: "#d5d9e0" } });
  }
  page.cy = cytoscape({ container: $("cy"), elements: els, style: STYLE, layout: { name: "preset" },
    autoungrabify: true });
  page.cy.fit(undefined, 20);
  page.cy.on("tap", "edge", (e) => select({ kind: "link", link: e.target.data("link"),
    a: e.target.data("source"), b: e.target.data("target") }));
  page.cy.on("tap", "node.switch", (e) => select({ kind: "switch", name: e.target.id() }));
  page.cy.on("tap", (e) => { if (e.target === page.cy) select(null); });
  $("changes-note").textContent = topo.changes
    ? "Changes need the token the server printed at start." : "This server is read-only.";
}

function select(what) {
  selected = what;
  page.cy.elements().removeClass("selected");
  let text = "Click a link or a switch.";
  if (what && what.kind === "link") {
    page.cy.edges(`[link = "${what.link}"]`).addClass("selected");
    text = `link ${what.a} - ${what.b}`;
  } else if (what && what.kind === "switch") {
    page.cy.getElementById(what.name).addClass("selected");
    text = `switch ${what.name}`;
  }
  $("selected").textContent = text;
  const canChange = page.topology && page.topology.changes;
  $("fail-link").disabled = $("restore-link").disabled = !(canChange && what && what.kind === "link");
  $("set-lb").disabled = !canChange;
}

function linksOf(state) {
  // link id -> "failed" (failure handling or the routes) or "injected" (taken down here only)
  const out = {};
  const f = state.failures || {};
  const key = (a, b) => [a, b].sort().join("|");
  if (f.detected) for (const x of f.detected.failures) for (const l of x.links) {
    const [a, b] = l.split("-"); out[key(a, b)] = "failed"; }
  for (const [a, b] of f.routed_around || []) out[key(a, b)] = "failed";
  if (f.injected) for (const l of f.injected.links || []) { const k = key(l[0], l[1]); if (!out[k]) out[k] = "injected"; }
  return out;
}

function render(state) {
  const cy = page.cy;
  if (!cy) return;
  page.state = state;
  const loads = state.loads || {}, queues = state.queues || {}, paused = state.pfc || {};
  const links = linksOf(state);
  const te = new Set(), agg = new Set(), watched = new Set(), roots = new Set();
  for (const p of state.te_paths || []) for (const [s, n] of p.hops) te.add(`${s}>${n}`);
  for (const j of state.jobs || []) if (j.state === "running") {
    for (const [c, p] of j.tree_edges) agg.add(`${c}>${p}`);
    if (j.root) roots.add(j.root);
  }
  const flow = watchedFlow(state);
  const hopLabel = {};
  if (flow) for (const h of flow.hops) {
    const d = page.topology.directions.find((x) => x.src === h.switch && x.port === h.egress_port);
    if (d) { watched.add(d.id); hopLabel[d.id] = `${h.latency_us ?? "?"}us q${h.queue ?? "?"}`; }
  }
  cy.batch(() => {
    cy.edges().forEach((e) => {
      const id = e.id(), load = loads[id], q = queues[id];
      const util = load ? load.util : undefined;
      const colour = loadColour(util);
      e.style({ "line-color": colour, "width": 2 + 4 * Math.min(util || 0, 1) });
      e.data("colour", colour);
      const parts = [];
      if (paused[id]) parts.push(`paused c${paused[id].join(",")}`);
      if (hopLabel[id]) parts.push(hopLabel[id]);
      else if (q && q.queue !== null && q.queue >= HOT_QUEUE) parts.push(`q${q.queue}`);
      e.data("label", parts.join(" "));
      e.toggleClass("failed", links[e.data("link")] === "failed");
      e.toggleClass("injected", links[e.data("link")] === "injected");
      e.toggleClass("te", te.has(id));
      e.toggleClass("agg", agg.has(id));
      e.toggleClass("watched", watched.has(id));
      e.toggleClass("paused", !!paused[id]);
    });
    const failedSwitches = new Set(((state.failures || {}).detected || { failures: [] }).failures
      .filter((f) => f.kind === "switch").map((f) => f.name));
    for (const s of ((state.failures || {}).injected || {}).switches || []) failedSwitches.add(s);
    cy.nodes(".switch").forEach((n) => {
      const sw = state.switches[n.id()] || {};
      n.removeClass("lb-ecmp lb-spray lb-flowlet");
      n.addClass(`lb-${sw.lb_mode}`);
      n.data("label", sw.lb_mode && sw.lb_mode !== "ecmp" ? `${n.id()}\n${sw.lb_mode}` : n.id());
      n.toggleClass("disconnected", !sw.connected);
      n.toggleClass("failed", failedSwitches.has(n.id()));
      n.toggleClass("aggroot", roots.has(n.id()));
    });
  });
  panels(state, links, flow);
  $("updated").textContent = `updated ${new Date(state.time * 1000).toLocaleTimeString()}`;
}

function watchedFlow(state) {
  const sel = $("flow-select"), flows = state.flows || [];
  const chosen = sel.value;
  sel.innerHTML = flows.length ? flows.map((f) => `<option${f.flow === chosen ? " selected" : ""}>${esc(f.flow)}</option>`).join("")
    : "<option value=''>(none)</option>";
  return flows.find((f) => f.flow === sel.value) || flows[0] || null;
}

function table(head, rows) {
  return `<table><tr>${head.map((h) => `<th>${esc(h)}</th>`).join("")}</tr>` +
    rows.map((r) => `<tr>${r.map((c) => `<td>${esc(c)}</td>`).join("")}</tr>`).join("") + "</table>";
}

function none(text) { return `<p class="none">${esc(text)}</p>`; }

function panels(state, links, flow) {
  const f = state.failures || {};
  let html = "";
  if (!f.handling) html += none("failure handling is not running: detected failures cannot be shown");
  const det = f.detected ? f.detected.failures : [];
  const rows = det.map((x) => [x.kind, x.name, x.links.join(", ")]);
  for (const [a, b] of f.routed_around || []) rows.push(["routed around", `${a}-${b}`, ""]);
  for (const l of (f.injected || {}).links || []) rows.push(["taken down here", l.join("-"), ""]);
  for (const s of (f.injected || {}).switches || []) rows.push(["switch killed here", s, ""]);
  html += rows.length ? table(["what", "name", "links"], rows) : none("none");
  $("failures").innerHTML = html;

  const rb = state.link_rates;
  $("rate-basis").textContent = rb ? `against each port's queue rate where set (${Object.keys(rb.queue_pps).length} ports), ` +
    `else ${(rb.nominal_bps / 1e9).toFixed(1)} Gbit/s nominal` : "port counters are not read by this server";

  const q = Object.entries(state.queues || {}).filter(([, v]) => v.queue_peak > 0)
    .sort((a, b) => b[1].queue_peak - a[1].queue_peak).slice(0, 10);
  $("queues").innerHTML = state.queues === null ? none("INT is off") :
    q.length ? table(["port (direction)", "queue", "peak", "latency us"], q.map(([d, v]) => [d, v.queue, v.queue_peak, v.latency_us])) : none("no queue seen");

  const p = Object.entries(state.pfc || {});
  $("pfc").innerHTML = state.pfc === null ? none("no traffic classes: PFC is off") :
    p.length ? table(["link direction", "paused classes"], p.map(([d, c]) => [d, c.join(", ")])) : none("no link paused");

  const modes = {};
  for (const [n, s] of Object.entries(state.switches)) (modes[s.lb_mode] = modes[s.lb_mode] || []).push(n);
  const anySet = Object.values(state.switches).some((s) => s.lb_mode_set);
  $("lb").innerHTML = table(["mode", "switches"], Object.entries(modes).map(([m, ns]) => [m, ns.join(" ")])) +
    (anySet ? "" : none("no mode set: the program's default"));

  $("te").innerHTML = state.te_paths === null ? none("no traffic engineering running") :
    state.te_paths.length ? table(["flow", "pinned path"], state.te_paths.map((p) => [p.flow, p.hops.map((h) => h.join(">")).join(" ")])) : none("no pins");

  $("jobs").innerHTML = state.jobs === null ? none("no aggregation jobs manager") : state.jobs.length ?
    table(["job", "state", "workers", "tree (root first)", "s", "chunks at root"], state.jobs.map((j) => [j.id, j.state,
      j.workers.length, j.tree || `at ${j.aggregator} (not in the switches)`, j.seconds,
      j.chunks_completed === null ? "-" : j.chunks_completed + (j.shared_root ? " (root shared)" : "")])) : none("no jobs");

  $("flow").innerHTML = state.flows === null ? none("INT is off") : flow ?
    `<p class="note">${flow.reports} reports, ${flow.paths_seen} path(s), seen ${flow.seen_s_ago} s ago</p>` +
    table(["hop", "switch", "in > out", "latency us", "queue"], flow.hops.map((h, i) => [i, h.switch, `${h.ingress_port} > ${h.egress_port}`,
      h.latency_us ?? "-", h.queue ?? "-"])) : none("no INT report yet");
}

function setConnected(on, why) {
  page.connected = on;
  const c = $("connection");
  c.textContent = on ? "live" : "server lost - reconnecting";
  c.className = `conn ${on ? "live" : "lost"}`;
  const b = $("banner");
  b.hidden = on;
  if (!on) b.textContent = `Lost the server (${why}); reconnecting every second. What is drawn is as it was.`;
}

function connect() {
  const es = new EventSource("/api/events");
  es.addEventListener("state", (ev) => {
    lastEventAt = Date.now();
    page.events += 1;
    if (!page.connected) setConnected(true);
    render(JSON.parse(ev.data));
  });
  es.addEventListener("error", (ev) => {
    if (ev.data) {      // the server could not build the state: say why
      lastEventAt = Date.now();
      const b = $("banner"); b.hidden = false;
      b.textContent = `The server could not read the fabric: ${JSON.parse(ev.data).error}`;
    } else {
      setConnected(false, "the event stream broke");
    }
  });
  setInterval(() => {
    if (page.connected && Date.now() - lastEventAt > STALE_MS) setConnected(false, `no update for ${STALE_MS / 1000} s`);
  }, 500);
}

async function change(action, body) {
  const out = $("change-result");
  out.className = ""; out.textContent = `${action}...`;
  try {
    const token = $("token").value.trim(), headers = { "Content-Type": "application/json" };
    if (token) headers.Authorization = `Bearer ${token}`;      // none typed: the server says a token is needed
    const r = await fetch(`/api/change/${action}`, { method: "POST", body: JSON.stringify(body), headers });
    const j = await r.json();
    out.className = r.ok ? "ok" : "err";
    out.textContent = r.ok ? `${action}: done` : `${action} refused (${r.status}): ${j.error}`;
  } catch (err) {
    out.className = "err"; out.textContent = `${action}: ${err}`;
  }
}

$("fail-link").onclick = () => change("fail-link", { a: selected.a, b: selected.b });
$("restore-link").onclick = () => change("restore-link", { a: selected.a, b: selected.b });
$("set-lb").onclick = () => change("lb-mode", selected && selected.kind === "switch"
  ? { mode: $("lb-mode").value, switches: [selected.name] } : { mode: $("lb-mode").value });
$("flow-select").onchange = () => page.state && render(page.state);
const fromHash = new URLSearchParams(location.hash.slice(1)).get("token");
if (fromHash) { $("token").value = fromHash; history.replaceState(null, "", location.pathname); }

fetch("/api/topology").then((r) => r.json()).then((topo) => { draw(topo); select(null); connect(); })
  .catch((err) => setConnected(false, `the topology could not be read: ${err}`));
