/* gpuwhy report timeline: draws the JSON block #gpuwhy-data on canvases. No network, no library.
 *
 * Data: tiers of buckets (finest first); every series holds, per tier, base64 bytes for the
 * bucket means (and min/max where a bucket merges several samples); 255 = no sample. The view
 * draws the coarsest tier that still gives one bucket per pixel, so a redraw costs a few
 * thousand buckets per series at any zoom. Text from the data goes into the page only through
 * textContent or canvas fillText, never as markup.
 */
(function () {
  "use strict";
  var source = document.getElementById("gpuwhy-data");
  var root = document.getElementById("tl");
  if (!source || !root) { return; }
  var D = JSON.parse(source.textContent).timeline;
  var MISSING = 255;
  var GUTTER = 128, PAD_R = 12, CHART_H = 50, CHART_GAP = 10, TOP = 8, BAND_H = 12, WAIT_H = 8;
  var AXIS_H = 24, OVERVIEW_H = 22;
  var tiers = D.tiers;
  var duration = D.duration_s > 0 ? D.duration_s : 1;
  var minSpan = Math.min(duration, Math.max(tiers[0].bucket_s * 6, 0.02));
  var view = { t0: 0, t1: duration };
  var lanes = [];
  var hidden = {};  // chart id -> true when its box is unticked
  var draws = 0;
  var pending = false;

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  function decode(text) {
    var raw = atob(text), out = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) { out[i] = raw.charCodeAt(i); }
    return out;
  }

  function arrays(tier) {
    if (!tier.decoded) {
      tier.decoded = {
        mean: decode(tier.mean),
        min: tier.min ? decode(tier.min) : null,
        max: tier.max ? decode(tier.max) : null
      };
    }
    return tier.decoded;
  }

  function pad2(n) { return (n < 10 ? "0" : "") + n; }

  function fmtTime(t, step) {
    var sign = t < 0 ? "-" : "";
    t = Math.abs(t);
    if (t < 60 && (step === undefined || step < 60)) {
      var digits = step === undefined ? 1 : (step >= 1 ? 0 : step >= 0.1 ? 1 : step >= 0.01 ? 2 : 3);
      return sign + t.toFixed(digits) + " s";
    }
    var whole = Math.floor(t + 1e-9), h = Math.floor(whole / 3600), m = Math.floor(whole / 60) % 60;
    var s = whole % 60, frac = step !== undefined && step < 1 ? (t - whole).toFixed(1).slice(1) : "";
    return sign + (h ? h + ":" + pad2(m) : m) + ":" + pad2(s) + frac;
  }

  function fmtValue(v, unit) {
    if (unit === "GiB") { return v.toFixed(1) + " GiB"; }
    if (unit === "W") { return v.toFixed(0) + " W"; }
    if (unit === "MB/s") { return v >= 1000 ? (v / 1000).toFixed(2) + " GB/s" : v.toFixed(0) + " MB/s"; }
    return v.toFixed(0) + " %";
  }

  function niceStep(raw) {
    var steps = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60,
      120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 432000];
    for (var i = 0; i < steps.length; i++) { if (steps[i] >= raw) { return steps[i]; } }
    return steps[steps.length - 1] * Math.ceil(raw / steps[steps.length - 1]);
  }

  function plotWidth() { return Math.max(root.clientWidth - GUTTER - PAD_R, 50); }

  function tierIndex() {
    var perPixel = (view.t1 - view.t0) / plotWidth(), chosen = 0;
    for (var k = 0; k < tiers.length; k++) { if (tiers[k].bucket_s <= perPixel) { chosen = k; } }
    return chosen;
  }

  function xOf(t) { return GUTTER + (t - view.t0) / (view.t1 - view.t0) * plotWidth(); }
  function tOf(x) { return view.t0 + (x - GUTTER) / plotWidth() * (view.t1 - view.t0); }

  function ticks() {
    var step = niceStep((view.t1 - view.t0) / Math.max(plotWidth() / 90, 1)), out = [];
    for (var t = Math.ceil(view.t0 / step) * step; t <= view.t1 + 1e-9; t += step) { out.push(t); }
    return { step: step, at: out };
  }

  function sizeCanvas(canvas, height) {
    var ratio = window.devicePixelRatio || 1, width = root.clientWidth;
    if (canvas.width !== Math.round(width * ratio) || canvas.height !== Math.round(height * ratio)) {
      canvas.width = Math.round(width * ratio);
      canvas.height = Math.round(height * ratio);
      canvas.style.width = width + "px";
      canvas.style.height = height + "px";
    }
    var ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    return ctx;
  }

  /* The visible buckets of a series as runs of points, at most one point per pixel column:
   * where several buckets share a column, their means are averaged and their min/max combined,
   * so a redraw costs one pass over the buckets and about one path point per pixel. A run ends
   * at a gap longer than `bridge` buckets (a sample every period lands in every bucket, but
   * jitter may skip one; a slower source skips more). */
  function columns(series, k, bridge) {
    var tier = tiers[k], data = arrays(series.tiers[k]), mean = data.mean;
    var lo = data.min || mean, hi = data.max || mean, width = tier.bucket_s, offset = tier.offset_s;
    var kx = plotWidth() / (view.t1 - view.t0);
    var i0 = Math.max(0, Math.floor((view.t0 - offset) / width) - 1);
    var i1 = Math.min(tier.count - 1, Math.ceil((view.t1 - offset) / width) + 1);
    var out = [], run = null, column = NaN, sumX = 0, sum = 0, n = 0, mn = 0, mx = 0, last = -Infinity;
    function flush() {
      if (n) { run.x.push(sumX / n); run.mean.push(sum / n); run.min.push(mn); run.max.push(mx); }
      n = 0; sumX = 0; sum = 0;
    }
    for (var i = i0; i <= i1; i++) {
      var q = mean[i];
      if (q === MISSING) { continue; }
      var x = GUTTER + (offset + (i + 0.5) * width - view.t0) * kx, c = Math.floor(x);
      if (!run || i - last > bridge) {
        flush();
        run = { x: [], mean: [], min: [], max: [] };
        out.push(run);
      } else if (c !== column) {
        flush();
      }
      if (!n) { mn = lo[i]; mx = hi[i]; } else { mn = Math.min(mn, lo[i]); mx = Math.max(mx, hi[i]); }
      column = c; sumX += x; sum += q; n += 1; last = i;
    }
    flush();
    return { runs: out, half: Math.max(width * kx / 2, 0.75), envelope: Boolean(data.min) };
  }

  function drawSeries(ctx, series, k, area, top, period) {
    var bridge = Math.max(2, Math.ceil(1.5 * period / tiers[k].bucket_s));
    var shape = columns(series, k, bridge), half = shape.half;
    var ky = area.h / top, base = area.y + area.h, low = series.low, step = series.step;
    function Y(q) { return Math.max(area.y, base - (low + q * step) * ky); }
    function trace(run, values, reverse) {
      var n = run.x.length, i;
      if (!reverse) {
        for (i = 0; i < n; i++) { ctx.lineTo(run.x[i], Y(values[i])); }
        ctx.lineTo(run.x[n - 1] + half, Y(values[n - 1]));
      } else {
        ctx.lineTo(run.x[n - 1] + half, Y(values[n - 1]));
        for (i = n - 1; i >= 0; i--) { ctx.lineTo(run.x[i], Y(values[i])); }
        ctx.lineTo(run.x[0] - half, Y(values[0]));
      }
    }
    ctx.fillStyle = series.color;
    ctx.strokeStyle = series.color;
    shape.runs.forEach(function (run) {
      var x0 = run.x[0] - half, x1 = run.x[run.x.length - 1] + half;
      if (shape.envelope) {
        ctx.globalAlpha = 0.22;
        ctx.beginPath();
        ctx.moveTo(x0, Y(run.max[0]));
        trace(run, run.max, false);
        trace(run, run.min, true);
        ctx.closePath();
        ctx.fill();
      }
      if (series.style === "area") {
        ctx.globalAlpha = 0.3;
        ctx.beginPath();
        ctx.moveTo(x0, base);
        ctx.lineTo(x0, Y(run.mean[0]));
        trace(run, run.mean, false);
        ctx.lineTo(x1, base);
        ctx.closePath();
        ctx.fill();
      }
      ctx.globalAlpha = 1;
      ctx.lineWidth = 1.3;
      ctx.beginPath();
      ctx.moveTo(x0, Y(run.mean[0]));
      trace(run, run.mean, false);
      ctx.stroke();
    });
    ctx.globalAlpha = 1;
  }

  function drawGrid(ctx, area, grid) {
    ctx.fillStyle = "#f5f6f8";
    ctx.fillRect(area.x, area.y, area.w, area.h);
    ctx.strokeStyle = "#e1e4e8";
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (var i = 0; i < grid.at.length; i++) {
      var x = Math.round(xOf(grid.at[i])) + 0.5;
      ctx.moveTo(x, area.y);
      ctx.lineTo(x, area.y + area.h);
    }
    ctx.moveTo(area.x, Math.round(area.y + area.h / 2) + 0.5);
    ctx.lineTo(area.x + area.w, Math.round(area.y + area.h / 2) + 0.5);
    ctx.stroke();
  }

  function drawBands(ctx, y, h, x0, x1, t0, t1) {
    var scale = (x1 - x0) / (t1 - t0);
    ctx.fillStyle = "#eef0f3";
    ctx.fillRect(x0, y, x1 - x0, h);
    for (var pass = 0; pass < 2; pass++) {
      for (var p = 0; p < D.phases.length; p++) {
        var phase = D.phases[p], iv = phase.intervals;
        if ((pass === 0) !== Boolean(phase.background)) { continue; }
        ctx.fillStyle = phase.color;
        for (var j = 0; j + 1 < iv.length; j += 2) {
          if (iv[j + 1] < t0 || iv[j] > t1) { continue; }
          var a = Math.max(x0, x0 + (iv[j] - t0) * scale);
          var b = Math.min(x1, x0 + (iv[j + 1] - t0) * scale);
          ctx.fillRect(a, y, Math.max(b - a, 1), h);
        }
      }
    }
  }

  function drawWait(ctx, k, y, h) {
    var tier = tiers[k], mean = arrays(D.wait[k]).mean, width = tier.bucket_s;
    var kx = plotWidth() / (view.t1 - view.t0);
    var i0 = Math.max(0, Math.floor((view.t0 - tier.offset_s) / width) - 1);
    var i1 = Math.min(tier.count - 1, Math.ceil((view.t1 - tier.offset_s) / width) + 1);
    ctx.fillStyle = "#eef0f3";
    ctx.fillRect(GUTTER, y, plotWidth(), h);
    ctx.fillStyle = D.wait_color;
    for (var i = i0; i <= i1; i++) {
      var q = mean[i];
      if (q === MISSING || q === 0) { continue; }
      var x = Math.max(GUTTER, GUTTER + (tier.offset_s + i * width - view.t0) * kx);
      var x1 = Math.min(GUTTER + plotWidth(), x + width * kx);
      ctx.globalAlpha = Math.min(1, 0.15 + 0.85 * q / 254);
      ctx.fillRect(x, y, Math.max(x1 - x, 1), h);
    }
    ctx.globalAlpha = 1;
  }

  function label(ctx, text, y, bold) {
    ctx.fillStyle = bold ? "#222" : "#666";
    ctx.font = (bold ? "600 " : "") + "11px system-ui, sans-serif";
    ctx.fillText(text, 6, y);
  }

  function drawLane(lane) {
    var ctx = sizeCanvas(lane.canvas, lane.height), k = tierIndex(), grid = ticks(), y = TOP;
    for (var c = 0; c < lane.spec.charts.length; c++) {
      if (hidden[lane.spec.charts[c].id]) { continue; }
      var chart = lane.spec.charts[c], area = { x: GUTTER, y: y, w: plotWidth(), h: CHART_H };
      drawGrid(ctx, area, grid);
      ctx.save();
      ctx.beginPath();
      ctx.rect(area.x, area.y, area.w, area.h);
      ctx.clip();
      for (var s = 0; s < chart.series.length; s++) { drawSeries(ctx, chart.series[s], k, area, chart.max, lane.spec.period_s); }
      ctx.restore();
      label(ctx, chart.title, y + 12, true);
      label(ctx, "0 – " + fmtValue(chart.max, chart.unit), y + 27, false);
      y += CHART_H + CHART_GAP;
    }
    drawBands(ctx, y, BAND_H, GUTTER, GUTTER + plotWidth(), view.t0, view.t1);
    label(ctx, "phases", y + 10, false);
    y += BAND_H + 3;
    if (D.wait) {
      drawWait(ctx, k, y, WAIT_H);
      label(ctx, "data wait", y + 8, false);
    }
    lane.dirty = false;
  }

  function drawAxis() {
    var ctx = sizeCanvas(axis, AXIS_H), grid = ticks();
    ctx.fillStyle = "#444";
    ctx.strokeStyle = "#999";
    ctx.font = "11px system-ui, sans-serif";
    ctx.textAlign = "center";
    ctx.beginPath();
    for (var i = 0; i < grid.at.length; i++) {
      var x = Math.round(xOf(grid.at[i])) + 0.5;
      ctx.moveTo(x, AXIS_H - 6);
      ctx.lineTo(x, AXIS_H);
      ctx.fillText(fmtTime(grid.at[i], grid.step), x, AXIS_H - 10);
    }
    ctx.stroke();
    ctx.textAlign = "left";
    label(ctx, "time since start", AXIS_H - 10, false);
  }

  function drawOverview() {
    var ctx = sizeCanvas(overview, OVERVIEW_H), x1 = GUTTER + plotWidth();
    drawBands(ctx, 4, OVERVIEW_H - 8, GUTTER, x1, 0, duration);
    var a = GUTTER + view.t0 / duration * plotWidth(), b = GUTTER + view.t1 / duration * plotWidth();
    ctx.fillStyle = "rgba(255,255,255,0.65)";
    ctx.fillRect(GUTTER, 0, Math.max(a - GUTTER, 0), OVERVIEW_H);
    ctx.fillRect(b, 0, Math.max(x1 - b, 0), OVERVIEW_H);
    ctx.strokeStyle = "#222";
    ctx.lineWidth = 1.5;
    ctx.strokeRect(a, 1, Math.max(b - a, 2), OVERVIEW_H - 2);
    label(ctx, "whole run", 15, false);
  }

  function visible(node) {
    var box = node.getBoundingClientRect();
    return box.bottom >= -200 && box.top <= (window.innerHeight || 800) + 200;
  }

  function drawVisible() {
    for (var i = 0; i < lanes.length; i++) {
      if (lanes[i].dirty && visible(lanes[i].canvas)) { drawLane(lanes[i]); }
    }
    root.setAttribute("data-drawn-lanes", String(lanes.filter(function (l) { return !l.dirty; }).length));
  }

  function redraw() {
    pending = false;
    draws += 1;
    var k = tierIndex();
    drawAxis();
    drawOverview();
    for (var i = 0; i < lanes.length; i++) { lanes[i].dirty = true; }
    drawVisible();
    var tier = tiers[k];
    var detail = tier.bucket_s <= D.period_s * 1.01 && D.raw && k === 0
      ? "every sample (" + fmtTime(tier.bucket_s) + ")"
      : "one point per " + fmtTime(tier.bucket_s) + ", shaded band = min–max inside it";
    status.textContent = fmtTime(view.t0) + " – " + fmtTime(view.t1) + " of " + fmtTime(duration) +
      " · " + detail;
    root.setAttribute("data-view", view.t0.toFixed(4) + "," + view.t1.toFixed(4));
    root.setAttribute("data-plot", GUTTER + "," + plotWidth());
    root.setAttribute("data-tier", String(k));
    root.setAttribute("data-draws", String(draws));
  }

  function schedule() {
    if (!pending) { pending = true; window.requestAnimationFrame(redraw); }
  }

  function setView(t0, t1) {
    var span = Math.min(Math.max(t1 - t0, minSpan), duration);
    var start = Math.min(Math.max(t0, 0), duration - span);
    view = { t0: start, t1: start + span };
    schedule();
  }

  function zoom(factor, at) {
    var centre = at === undefined ? (view.t0 + view.t1) / 2 : at;
    setView(centre - (centre - view.t0) * factor, centre + (view.t1 - centre) * factor);
  }

  function pan(fraction) {
    var shift = (view.t1 - view.t0) * fraction;
    setView(view.t0 + shift, view.t1 + shift);
  }

  /* ---- building the page ---------------------------------------------------------------- */

  var toolbar = el("div", "tl-toolbar");
  function button(text, title, action) {
    var node = el("button", "", text);
    node.type = "button";
    node.title = title;
    node.addEventListener("click", action);
    toolbar.appendChild(node);
    return node;
  }
  button("−", "zoom out (−)", function () { zoom(2); });
  button("+", "zoom in (+)", function () { zoom(0.5); });
  button("◀", "earlier (←)", function () { pan(-0.25); });
  button("▶", "later (→)", function () { pan(0.25); });
  button("Whole run", "show the whole run (0 or double-click)", function () { setView(0, duration); });
  var status = el("span", "tl-status");
  toolbar.appendChild(status);
  var help = el("span", "tl-help",
    "drag across a chart to zoom in · Ctrl+wheel zooms · Shift+wheel pans · double-click resets");
  toolbar.appendChild(help);
  root.appendChild(toolbar);

  var sticky = el("div", "tl-sticky");
  var axis = el("canvas", "tl-axis");
  var overview = el("canvas", "tl-overview");
  sticky.appendChild(overview);
  sticky.appendChild(axis);
  root.appendChild(sticky);
  var board = el("div", "tl-lanes");
  root.appendChild(board);
  var selection = el("div", "tl-selection");
  var cursor = el("div", "tl-cursor");
  board.appendChild(selection);
  board.appendChild(cursor);
  var tip = el("div", "tl-tip");
  document.body.appendChild(tip);

  function laneHeight(spec) {
    var shown = spec.charts.filter(function (chart) { return !hidden[chart.id]; }).length;
    return TOP + shown * (CHART_H + CHART_GAP) + BAND_H + (D.wait ? WAIT_H + 5 : 2);
  }

  function addLane(spec) {
    var box = el("div", "tl-lane");
    var title = el("div", "tl-lane-title");
    title.appendChild(el("span", "tl-lane-name", spec.title));
    spec.charts.forEach(function (chart) {
      chart.series.forEach(function (series) {
        var key = el("span", "tl-key");
        var dot = el("i");
        dot.style.background = series.color;
        key.appendChild(dot);
        key.appendChild(document.createTextNode(series.label));
        title.appendChild(key);
      });
    });
    box.appendChild(title);
    var canvas = el("canvas", "tl-canvas");
    box.appendChild(canvas);
    board.appendChild(box);
    var lane = { spec: spec, canvas: canvas, height: laneHeight(spec), dirty: true };
    lanes.push(lane);
    canvas.style.height = lane.height + "px";
    canvas.addEventListener("mousemove", function (event) { hover(lane, event); });
    canvas.addEventListener("mouseleave", function () { tip.style.display = "none"; cursor.style.display = "none"; });
  }

  D.gpu_lanes.forEach(addLane);
  if (D.host_lane) { addLane(D.host_lane); }

  /* Charts to show: with eight GPUs a reader may keep only utilization, say. */
  var picker = el("span", "tl-picker", "show: "), seen = {};
  lanes.forEach(function (lane) {
    lane.spec.charts.forEach(function (chart) {
      if (seen[chart.id]) { return; }
      seen[chart.id] = true;
      var box = el("input"), item = el("label");
      box.type = "checkbox";
      box.checked = true;
      box.setAttribute("data-chart", chart.id);
      box.addEventListener("change", function () {
        hidden[chart.id] = !box.checked;
        lanes.forEach(function (each) {
          each.height = laneHeight(each.spec);
          each.canvas.style.height = each.height + "px";
        });
        schedule();
      });
      item.appendChild(box);
      item.appendChild(document.createTextNode(chart.title));
      picker.appendChild(item);
    });
  });
  toolbar.insertBefore(picker, help);
  if (!D.gpu_lanes.length) {
    board.insertBefore(el("p", "tl-empty", "No GPU samples in this recording: only the host is drawn."),
      board.firstChild);
  }

  /* ---- hover -------------------------------------------------------------------------------- */

  function phasesAt(t) {
    var names = [];
    D.phases.forEach(function (phase) {
      var iv = phase.intervals, lo = 0, hi = iv.length / 2 - 1;
      while (lo <= hi) {
        var mid = (lo + hi) >> 1;
        if (iv[2 * mid + 1] < t) { lo = mid + 1; } else if (iv[2 * mid] > t) { hi = mid - 1; } else { names.push(phase.name); return; }
      }
    });
    return names;
  }

  /* The bucket at time t, or the nearest one with data within `reach` buckets. */
  function valueAt(tierData, k, t, reach) {
    var tier = tiers[k], i = Math.floor((t - tier.offset_s) / tier.bucket_s);
    var data = arrays(tierData);
    for (var d = 0; d <= (reach || 0); d++) {
      if (i - d >= 0 && i - d < tier.count && data.mean[i - d] !== MISSING) { return { i: i - d, data: data }; }
      if (i + d >= 0 && i + d < tier.count && data.mean[i + d] !== MISSING) { return { i: i + d, data: data }; }
    }
    return null;
  }

  function hover(lane, event) {
    var box = lane.canvas.getBoundingClientRect(), x = event.clientX - box.left;
    if (x < GUTTER || x > GUTTER + plotWidth() || dragging) {
      tip.style.display = "none";
      return;
    }
    var t = tOf(x), k = tierIndex();
    while (tip.firstChild) { tip.removeChild(tip.firstChild); }
    tip.appendChild(el("div", "tip-time", fmtTime(t, 0.1) + " · " + lane.spec.title));
    var names = phasesAt(t);
    tip.appendChild(el("div", "tip-phase", "phase: " + (names.length ? names.join(", ") : "–")));
    if (D.wait) {
      var wait = valueAt(D.wait[k], k, t);
      if (wait && wait.data.mean[wait.i] > 0) {
        tip.appendChild(el("div", "tip-phase", "data wait: " + Math.round(wait.data.mean[wait.i] / 2.54) + " %"));
      }
    }
    lane.spec.charts.forEach(function (chart) {
      if (hidden[chart.id]) { return; }
      chart.series.forEach(function (series) {
        var reach = Math.ceil(0.75 * lane.spec.period_s / tiers[k].bucket_s);
        var found = valueAt(series.tiers[k], k, t, reach), text = "–";
        if (found) {
          var d = found.data, i = found.i;
          var v = function (q) { return fmtValue(series.low + q * series.step, chart.unit); };
          text = v(d.mean[i]);
          if (d.min && d.min[i] !== d.max[i]) { text += " (" + v(d.min[i]) + " – " + v(d.max[i]) + ")"; }
        }
        var line = el("div", "tip-line");
        var dot = el("i");
        dot.style.background = series.color;
        line.appendChild(dot);
        line.appendChild(document.createTextNode(series.label + ": " + text));
        tip.appendChild(line);
      });
    });
    tip.style.display = "block";
    var left = event.clientX + 14, width = tip.offsetWidth;
    if (left + width > window.innerWidth - 4) { left = event.clientX - width - 14; }
    tip.style.left = left + "px";
    tip.style.top = Math.min(event.clientY + 14, window.innerHeight - tip.offsetHeight - 4) + "px";
    cursor.style.display = "block";
    cursor.style.left = x + "px";
  }

  /* ---- zoom and pan ------------------------------------------------------------------------- */

  var dragging = null;
  board.addEventListener("mousedown", function (event) {
    var box = board.getBoundingClientRect(), x = event.clientX - box.left;
    if (event.button !== 0 || x < GUTTER || x > GUTTER + plotWidth()) { return; }
    dragging = { x0: x, x1: x, left: box.left };
    event.preventDefault();
  });
  window.addEventListener("mousemove", function (event) {
    if (!dragging) { return; }
    dragging.x1 = Math.min(Math.max(event.clientX - dragging.left, GUTTER), GUTTER + plotWidth());
    selection.style.display = "block";
    selection.style.left = Math.min(dragging.x0, dragging.x1) + "px";
    selection.style.width = Math.abs(dragging.x1 - dragging.x0) + "px";
  });
  window.addEventListener("mouseup", function () {
    if (!dragging) { return; }
    var a = Math.min(dragging.x0, dragging.x1), b = Math.max(dragging.x0, dragging.x1);
    dragging = null;
    selection.style.display = "none";
    if (b - a >= 5) { setView(tOf(a), tOf(b)); }
  });
  board.addEventListener("dblclick", function () { setView(0, duration); });
  board.addEventListener("wheel", function (event) {
    var box = board.getBoundingClientRect(), x = event.clientX - box.left;
    if (event.ctrlKey || event.metaKey) {
      event.preventDefault();
      zoom(Math.pow(1.0015, event.deltaY), x >= GUTTER ? tOf(x) : undefined);
    } else if (event.shiftKey || Math.abs(event.deltaX) > Math.abs(event.deltaY)) {
      event.preventDefault();
      pan((event.shiftKey ? event.deltaY : event.deltaX) / plotWidth());
    }
  }, { passive: false });

  var overviewDrag = false;
  function overviewMove(event) {
    var box = overview.getBoundingClientRect();
    var t = (event.clientX - box.left - GUTTER) / plotWidth() * duration, span = view.t1 - view.t0;
    setView(t - span / 2, t + span / 2);
  }
  overview.addEventListener("mousedown", function (event) { overviewDrag = true; overviewMove(event); event.preventDefault(); });
  window.addEventListener("mousemove", function (event) { if (overviewDrag) { overviewMove(event); } });
  window.addEventListener("mouseup", function () { overviewDrag = false; });

  root.addEventListener("keydown", function (event) {
    var keys = { "+": function () { zoom(0.5); }, "=": function () { zoom(0.5); }, "-": function () { zoom(2); },
      ArrowLeft: function () { pan(-0.25); }, ArrowRight: function () { pan(0.25); },
      "0": function () { setView(0, duration); }, Home: function () { setView(0, duration); } };
    if (keys[event.key]) { keys[event.key](); event.preventDefault(); }
  });
  window.addEventListener("resize", schedule);
  window.addEventListener("scroll", function () { window.requestAnimationFrame(drawVisible); }, { passive: true });

  redraw();
  root.setAttribute("data-ready", "1");
}());
