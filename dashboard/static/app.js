// geops dashboard: follows /api/events (a snapshot, then an update per period) and draws the
// partition map (Leaflet, CRS.Simple, no tiles) and the time series (uPlot).
"use strict";

const WORKER_COLORS = ["#2166ac", "#1b9e77", "#7b3294", "#4d4d4d", "#e7298a", "#66a61e",
  "#a6761d", "#1f78b4", "#6a3d9a", "#b15928"];
const LOAD_RAMP = ["#f2f2f2", "#ffeda0", "#feb24c", "#f03b20", "#99000d"];
const $ = (id) => document.getElementById(id);

function workerColor(w) { return WORKER_COLORS[w % WORKER_COLORS.length]; }

function fmt(v, digits = 0) {
  if (v === null || v === undefined) return "–";
  return Number(v).toLocaleString("en-US", { maximumFractionDigits: digits,
    minimumFractionDigits: digits });
}

function plural(n, word) { return `${n} ${word}${n === 1 ? "" : "s"}`; }

function clockText(ms) { return ms ? new Date(ms).toLocaleTimeString("en-GB") : "–"; }

function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;",
    "\"": "&quot;", "'": "&#39;" }[c]));
}

function mix(a, b, t) {
  const pa = [1, 3, 5].map((i) => parseInt(a.slice(i, i + 2), 16));
  const pb = [1, 3, 5].map((i) => parseInt(b.slice(i, i + 2), 16));
  return "#" + pa.map((x, i) => Math.round(x + (pb[i] - x) * t).toString(16).padStart(2, "0"))
    .join("");
}

function loadColor(share) {
  const s = Math.max(0, Math.min(1, share)) * (LOAD_RAMP.length - 1);
  const i = Math.min(Math.floor(s), LOAD_RAMP.length - 2);
  return mix(LOAD_RAMP[i], LOAD_RAMP[i + 1], s - i);
}

// -- the map --------------------------------------------------------------------------------

const map = L.map("map", { crs: L.CRS.Simple, zoomSnap: 0, zoomDelta: 0.5, minZoom: -20,
  maxZoom: 30, attributionControl: false });
map.setView([0, 0], 0);
map.createPane("points");
map.getPane("points").style.zIndex = 450;
map.getPane("points").style.pointerEvents = "none";
const cellRenderer = L.svg({ padding: 0.2 });
const pointRenderer = L.canvas({ padding: 0.2, pane: "points" });
const cellLayer = L.layerGroup().addTo(map);
const outlineLayer = L.layerGroup().addTo(map);
const pointLayer = L.layerGroup().addTo(map);
let cells = [];        // per partition: {rect, outlines, ownersKey}
let layoutKey = null;
let layoutBounds = null;
let mapMessage = null;

function fitMap() {
  map.invalidateSize();
  if (layoutBounds) map.fitBounds(layoutBounds, { padding: [8, 8] });
}
new ResizeObserver(fitMap).observe($("map"));

function showMapMessage(text) {
  if (!mapMessage) {
    mapMessage = document.createElement("div");
    mapMessage.className = "map-message";
    $("map").appendChild(mapMessage);
  }
  mapMessage.textContent = text;
  mapMessage.hidden = !text;
}

// Cells without bounds (hash partitioning, or no PartitionLayout yet): a grid of squares.
function gridBounds(q, count) {
  const cols = Math.ceil(Math.sqrt(count));
  const col = q % cols;
  const row = Math.floor(q / cols);
  return [-row - 1, col, -row, col + 1];
}

function cellBounds(p, count) {
  const b = p.bounds || (() => { const g = gridBounds(p.id, count); return [g[1], g[0], g[3], g[2]]; })();
  return L.latLngBounds([b[1], b[0]], [b[3], b[2]]);
}

function rebuildCells(doc) {
  cellLayer.clearLayers();
  outlineLayer.clearLayers();
  cells = doc.partitions.map((p) => {
    const rect = L.rectangle(cellBounds(p, doc.partitions.length), {
      renderer: cellRenderer, weight: 2, color: "#999", fillColor: LOAD_RAMP[0],
      fillOpacity: 0.75, className: "cell" });
    rect.bindTooltip("", { sticky: true, direction: "top", opacity: 0.95 });
    rect.addTo(cellLayer);
    return { rect, outlines: [], ownersKey: null };
  });
  layoutBounds = doc.partitions.length
    ? L.latLngBounds(doc.partitions.map((p) => cellBounds(p, doc.partitions.length))
      .flatMap((b) => [b.getSouthWest(), b.getNorthEast()]))
    : null;
  fitMap();
}

function setOwners(cell, owners, bounds) {
  const key = owners.join(",");
  if (cell.ownersKey === key) return;
  cell.ownersKey = key;
  cell.outlines.forEach((o) => outlineLayer.removeLayer(o));
  cell.outlines = [];
  if (owners.length <= 1) {
    cell.rect.setStyle({ color: owners.length ? workerColor(owners[0]) : "#999", weight: 2,
      dashArray: null, dashOffset: null });
    return;
  }
  // a replicated cell: dashes of every owner's colour, one after the other
  const dash = 7;
  const gap = dash * (owners.length - 1);
  cell.rect.setStyle({ color: workerColor(owners[0]), weight: 3, dashArray: `${dash} ${gap}`,
    dashOffset: "0" });
  owners.slice(1).forEach((w, i) => {
    const outline = L.rectangle(bounds, { renderer: cellRenderer, weight: 3, fill: false,
      interactive: false, color: workerColor(w), dashArray: `${dash} ${gap}`,
      dashOffset: `${-(i + 1) * dash}`, className: "cell-outline" });
    outline.addTo(outlineLayer);
    cell.outlines.push(outline);
  });
}

function drawMap(doc) {
  const parts = doc.partitions || [];
  const key = parts.map((p) => (p.bounds || ["g"]).join(",")).join(";");
  if (key !== layoutKey) {
    layoutKey = key;
    rebuildCells(doc);
  }
  if (!parts.length) {
    showMapMessage("waiting for the app's partition layout (PartitionLayout on the metrics topic)");
  } else if (!doc.layout) {
    showMapMessage("no partition layout from the app yet: partitions drawn as a grid");
  } else if (doc.layout.partitioner === "hash") {
    showMapMessage("");
  } else {
    showMapMessage("");
  }
  const maxLoad = Math.max(0, ...parts.map((p) => p.load_ms_per_s || 0));
  $("load-max").textContent = `${fmt(maxLoad, maxLoad < 10 ? 1 : 0)} ms/s`;
  parts.forEach((p, i) => {
    const cell = cells[i];
    if (!cell) return;
    const load = p.load_ms_per_s || 0;
    cell.rect.setStyle({ fillColor: maxLoad > 0 ? loadColor(load / maxLoad) : LOAD_RAMP[0] });
    setOwners(cell, p.owners, cell.rect.getBounds());
    const shares = Object.entries(p.load_by_owner_ms_per_s || {})
      .map(([w, v]) => `w${w} ${fmt(v, 1)}`).join(", ");
    cell.rect.setTooltipContent(
      `<b>partition ${p.id}</b><br>owner${p.owners.length > 1 ? "s" : ""}: ` +
      `${p.owners.map((w) => "worker " + w).join(", ") || "–"}<br>` +
      `load: ${fmt(load, 1)} ms/s${shares && p.owners.length > 1 ? ` (${shares})` : ""}, ` +
      `${fmt(p.items)} items in ${fmt(doc.window_s)} s<br>` +
      `subscriptions: ${fmt(p.subscriptions)}`);
    cell.rect.getElement()?.setAttribute("data-partition", String(p.id));
  });
  pointLayer.clearLayers();
  const hashed = doc.layout && doc.layout.partitioner === "hash";
  if (!hashed) {
    for (const [x, y] of doc.points || []) {
      L.circleMarker([y, x], { renderer: pointRenderer, radius: 1.5, stroke: false,
        fillColor: "#1d2430", fillOpacity: 0.35, interactive: false }).addTo(pointLayer);
    }
  }
  const layout = doc.layout;
  const drawn = hashed ? 0 : (doc.points || []).length;
  $("map-note").textContent = layout
    ? `${layout.partitioner}${hashed ? " (no places)" : ""} · last ${fmt(doc.window_s)} s: ` +
      `${fmt(doc.publications)} publications` +
      (drawn < doc.publications ? ` (${fmt(drawn)} drawn)` : "")
    : "";
  const workers = doc.workers || 0;
  $("owners-legend").innerHTML = Array.from({ length: workers }, (_, w) =>
    `<span class="swatch" style="border-color:${workerColor(w)}"></span>worker ${w}`).join("");
}

// -- the time series --------------------------------------------------------------------------

let S = null;          // columns of the series, x in seconds
let windowS = 5;       // the map's window, also what the figures and rates are averaged over
let rebalances = [];
let historyS = 600;
const charts = {};

function markerPlugin() {
  return { hooks: { draw: [(u) => {
    const dpr = window.devicePixelRatio || 1;
    const { left, top, width, height } = u.bbox;
    const ctx = u.ctx;
    ctx.save();
    ctx.strokeStyle = "#b42318";
    ctx.fillStyle = "#b42318";
    ctx.lineWidth = dpr;
    ctx.setLineDash([4 * dpr, 3 * dpr]);
    ctx.font = `${10 * dpr}px system-ui, sans-serif`;
    ctx.textBaseline = "alphabetic";
    for (const r of rebalances) {
      const x = r.time_ms / 1000;
      if (x < u.scales.x.min || x > u.scales.x.max) continue;
      const px = Math.round(u.valToPos(x, "x", true));
      ctx.beginPath();
      ctx.moveTo(px, top);
      ctx.lineTo(px, top + height);
      ctx.stroke();
      // the label right of its line, or left of it where it would pass the plot's right edge
      // (the axes leave the canvas's alignment as they drew their last label: set it here)
      const label = `e${r.epoch} · ${plural(r.moves.length, "move")}`;
      const right = px + 3 * dpr + ctx.measureText(label).width <= left + width;
      ctx.textAlign = right ? "left" : "right";
      ctx.fillText(label, right ? px + 3 * dpr : px - 3 * dpr, top + 11 * dpr);
    }
    ctx.restore();
  }] } };
}

// The plot takes the chart's box less its padding and its head, one line or two.
function chartSize(el) {
  const head = el.querySelector(".chart-head").offsetHeight;
  return { width: Math.max(200, el.clientWidth - 12),
    height: Math.max(90, el.clientHeight - 8 - head) };
}

// The width of a y axis: 48 px, or more when its longest label needs it (five-digit event
// rates on the right of the rates chart), so that no label is cut off at the chart's edge.
function fitLabels(u, values, axisIdx, cycleNum) {
  const axis = u.axes[axisIdx];
  if (cycleNum > 1) return axis._size;
  u.ctx.font = axis.font[0];
  const widest = Math.max(0, ...(values || []).map((v) => u.ctx.measureText(v).width));
  const ticks = axis.ticks.show ? axis.ticks.size : 0;
  return Math.max(48, Math.ceil(ticks + axis.gap + widest / uPlot.pxRatio));
}

// rightScale: the name of a second y scale, drawn on the right, for series that say it
function makeChart(id, series, data, yLabel, rightScale) {
  const el = $(id);
  if (charts[id]) charts[id].destroy();
  const axes = [{ size: 28, font: "10px system-ui" },
    { size: fitLabels, font: "10px system-ui", label: yLabel, labelSize: 0 }];
  if (rightScale) axes.push({ scale: rightScale, side: 1, size: fitLabels, font: "10px system-ui",
    grid: { show: false } });
  const opts = {
    ...chartSize(el),
    legend: { show: false },
    cursor: { drag: { x: false, y: false } },
    scales: { x: { time: true }, ...(rightScale ? { [rightScale]: {} } : {}) },
    axes,
    series: [{}, ...series.map((s) => ({ width: 1.5, spanGaps: true, points: { show: false },
      ...s }))],
    plugins: [markerPlugin()],
  };
  charts[id] = new uPlot(opts, data, el);
}

// Rates and loads per period jump between 0 and a batch's worth when batches and periods
// differ in length: the charts draw them as the mean over the map's window (the page's
// figures likewise); /api/series keeps the values per period.
function smooth(col) {
  const out = new Array(col.length).fill(null);
  let sum = 0;
  let count = 0;
  let first = 0;
  for (let i = 0; i < col.length; i++) {
    if (col[i] !== null && col[i] !== undefined) { sum += col[i]; count++; }
    while (S.t[first] <= S.t[i] - windowS) {
      if (col[first] !== null && col[first] !== undefined) { sum -= col[first]; count--; }
      first++;
    }
    out[i] = count ? sum / count : null;
  }
  return out;
}

function chartData() {
  return {
    "c-rates": [S.t, smooth(S.input), smooth(S.output), smooth(S.events)],
    "c-lag": [S.t, S.lag],
    "c-latency": [S.t, S.p50, S.p99],
    "c-workers": [S.t, ...S.workers.map(smooth)],
    "c-mldc": [S.t, S.mldc, S.threshold],
  };
}

function buildCharts() {
  const d = chartData();
  makeChart("c-rates", [{ label: "in", stroke: "#2166ac" },
    { label: "out", stroke: "#1b9e77" },
    { label: "events", stroke: "#d95f02", scale: "events" }], d["c-rates"], undefined,
  "events");
  makeChart("c-lag", [{ label: "lag", stroke: "#7b3294" }], d["c-lag"]);
  makeChart("c-latency", [{ label: "p50", stroke: "#2166ac" },
    { label: "p99", stroke: "#b42318" }], d["c-latency"]);
  makeChart("c-workers", S.workers.map((_, w) => ({ label: `worker ${w}`,
    stroke: workerColor(w) })), d["c-workers"]);
  makeChart("c-mldc", [{ label: "MLDC", stroke: "#1d2430" },
    { label: "threshold", stroke: "#b42318", dash: [6, 4], width: 1 }], d["c-mldc"]);
}

function setSeries(doc) {
  S = { t: doc.time_ms.map((v) => v / 1000), input: doc.input_rate, output: doc.output_rate,
    lag: doc.lag, p50: doc.p50_ms, p99: doc.p99_ms, mldc: doc.mldc,
    threshold: doc.threshold, workers: doc.worker_load_ms_per_s,
    events: doc.events_per_s || doc.time_ms.map(() => null) };
  buildCharts();
  drawFigures();
}

function appendRow(row) {
  const n = S.t.length;
  S.t.push(row.time_ms / 1000);
  S.input.push(row.input_rate);
  S.output.push(row.output_rate);
  S.events.push(row.events_per_s ?? null);
  S.lag.push(row.lag);
  S.p50.push(row.p50_ms);
  S.p99.push(row.p99_ms);
  S.mldc.push(row.mldc);
  S.threshold.push(row.threshold);
  const loads = row.worker_load_ms_per_s || [];
  let grew = false;
  while (S.workers.length < loads.length) {
    S.workers.push(new Array(n).fill(null));
    grew = true;
  }
  S.workers.forEach((col, w) => col.push(w < loads.length ? loads[w] : null));
  const oldest = S.t[S.t.length - 1] - historyS;
  while (S.t.length && S.t[0] < oldest) {
    for (const col of [S.t, S.input, S.output, S.events, S.lag, S.p50, S.p99, S.mldc, S.threshold,
      ...S.workers]) col.shift();
  }
  drawFigures();
  if (grew) {
    buildCharts();
    return;
  }
  const d = chartData();
  for (const id of Object.keys(d)) charts[id].setData(d[id]);
}

// -- the panels -------------------------------------------------------------------------------

// The newest value of a column within the last windowS seconds (periods without a batch have
// none), or the mean over that stretch for rates, so the figures do not flicker.
function recent(col, mean = false) {
  if (!S || !S.t.length) return null;
  const since = S.t[S.t.length - 1] - windowS;
  const vals = [];
  for (let i = S.t.length - 1; i >= 0 && S.t[i] > since; i--) {
    if (col[i] !== null && col[i] !== undefined) vals.push(col[i]);
  }
  if (!vals.length) return null;
  return mean ? vals.reduce((a, b) => a + b, 0) / vals.length : vals[0];
}

function drawFigures() {
  $("v-input").textContent = fmt(recent(S.input, true));
  $("v-output").textContent = fmt(recent(S.output, true));
  $("v-events").textContent = fmt(recent(S.events, true));
  $("v-lag").textContent = fmt(recent(S.lag));
  $("v-p50").textContent = fmt(recent(S.p50));
  $("v-p99").textContent = fmt(recent(S.p99));
  $("v-mldc").textContent = fmt(recent(S.mldc), 2);
  $("v-threshold").textContent = fmt(recent(S.threshold), 2);
  $("v-workers").textContent = S.workers.map((col) => fmt(recent(col, true))).join(" / ") || "–";
}

function drawState(state) {
  historyS = state.history_s || historyS;
  $("app").textContent = `app ${state.app_id}`;
  $("epoch").textContent = `epoch ${state.epoch ?? "–"}`;
  const app = state.app;
  $("shape").textContent = [state.workers ? `${state.workers} workers` : null,
    state.partitions ? `${state.partitions} partitions` : null,
    app ? `${app.strategy} ${app.join}` : null,
    app ? `batch ${app.batch_id}` : null].filter(Boolean).join(" · ") || "no batch yet";
  $("clock").textContent = `updated ${clockText(state.time_ms)}`;
  setBanner(state.problem ? `${state.problem} (retrying)` : "");
  windowS = state.window_s || windowS;
  const d = state.decision;
  if (d) {
    $("v-decision").textContent = d.decision;
    $("v-decision").className = d.decision;
    $("decision-meta").textContent = `${clockText(d.time_ms)} · mode ${d.mode} · ${d.metric} · ` +
      `period ${d.period} · epoch ${d.epoch} · MLDC ${fmt(d.mldc, 2)} (threshold ` +
      `${fmt(d.threshold, 2)})`;
    $("decision-reason").textContent = d.reason;
  }
  drawRebalances(state.rebalances || []);
}

function drawRebalances(list) {
  const changed = JSON.stringify(list) !== JSON.stringify(rebalances);
  rebalances = list;
  if (!changed) return;
  const body = $("rebalances").tBodies[0];
  if (!list.length) {
    body.innerHTML = '<tr class="empty"><td colspan="6" class="muted">none yet</td></tr>';
  } else {
    body.innerHTML = list.slice().reverse().map((r) => {
      const moves = r.moves.map(([p, a, b]) => `p${p} ${a}→${b}`).join(", ");
      const reps = r.replicas.map(([p, ws]) => `p${p} on ${ws.join("+")}`).join(", ");
      const applied = r.applied
        ? `batch ${r.applied.batch_id}, ${r.applied.partitions_moved.length} partitions, ` +
          `${fmt(r.applied.bytes / 1024)} KiB in ${fmt(r.applied.duration_ms)} ms`
        : "not yet";
      return `<tr data-epoch="${r.epoch}"><td>${r.epoch}</td><td>${clockText(r.time_ms)}</td>` +
        `<td>${fmt(r.mldc_before, 2)} → ${fmt(r.mldc_predicted, 2)}</td>` +
        `<td>${plural(r.moves.length, "move")}${moves ? ": " + escapeHtml(moves) : ""}` +
        `${reps ? "; replicated " + escapeHtml(reps) : ""}</td>` +
        `<td>${escapeHtml(applied)}</td>` +
        `<td class="reason" title="${escapeHtml(r.reason)}">${escapeHtml(r.reason)}</td></tr>`;
    }).join("");
  }
  Object.values(charts).forEach((c) => c.redraw(false));
}

function setBanner(text) {
  const b = $("banner");
  b.textContent = text;
  b.hidden = !text;
}

// -- the stream -------------------------------------------------------------------------------

function connect() {
  const source = new EventSource("/api/events");
  source.addEventListener("snapshot", (e) => {
    const doc = JSON.parse(e.data);
    drawState(doc.state);
    setSeries(doc.series);
    drawMap(doc.map);
    document.body.dataset.version = doc.version;
  });
  source.addEventListener("update", (e) => {
    const doc = JSON.parse(e.data);
    drawState(doc.state);
    if (doc.row && S) appendRow(doc.row);
    drawMap(doc.map);
    document.body.dataset.version = doc.version;
  });
  source.onerror = () => {
    setBanner("the dashboard server does not answer; reconnecting…");
  };
  source.onopen = () => setBanner("");
}

const resized = new ResizeObserver((entries) => {
  for (const entry of entries) {
    const chart = charts[entry.target.id];
    if (chart) chart.setSize(chartSize(entry.target));
  }
});
["c-rates", "c-lag", "c-latency", "c-workers", "c-mldc"].forEach((id) => resized.observe($(id)));

connect();
