/* gpuwhy trace report: the zoomable kernel timeline, one canvas per rank, drawn from the JSON
 * block #gpuwhy-kernels (report/html/kernel_lanes.py). No network, no library.
 *
 * Rows: the profiled steps; the host's data-loader and blocking-sync calls; then one row per
 * (device, stream) with each kernel, copy and set as a box coloured by kind. At any zoom only
 * the ops in view are visited (binary search on start), and ops that fall on a pixel already
 * painted are skipped, so a redraw costs at most a few boxes per pixel column. Text from the
 * data reaches the page only through textContent or canvas fillText, never as markup.
 */
(function () {
  "use strict";
  var source = document.getElementById("gpuwhy-kernels");
  if (!source) { return; }
  var RANKS = JSON.parse(source.textContent);
  var GUTTER = 150, PAD_R = 12, AXIS_H = 20, ROW_H = 16, ROW_GAP = 3, MIN_SPAN_NS = 2000;
  var KINDS = ["compute", "communication", "memcpy", "memset"];
  var COLORS = ["#2f7ed8", "#e67e22", "#27ae60", "#95a5a6"];
  var LOADER = "#c0392b", SYNC = "#8e44ad";
  var tip = el("div", "tl-tip kl-tip");
  document.body.appendChild(tip);

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  function fmtDur(ns) {
    var a = Math.abs(ns);
    if (a === 0) { return "0"; }
    if (a < 1e3) { return Math.round(ns) + " ns"; }
    if (a < 1e6) { return (ns / 1e3).toFixed(a < 1e4 ? 2 : 1) + " µs"; }
    if (a < 1e9) { return (ns / 1e6).toFixed(a < 1e7 ? 2 : 1) + " ms"; }
    return (ns / 1e9).toFixed(3) + " s";
  }

  function niceStep(raw) {
    var p = Math.pow(10, Math.floor(Math.log(raw) / Math.LN10)), m = raw / p;
    return p * (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10);
  }

  /* Absolute starts from the gaps the data stores, and each lane's longest op (for the search). */
  function unpack(lane) {
    var n = lane.start.length, starts = new Float64Array(n), t = 0, longest = 0;
    for (var i = 0; i < n; i++) {
      t += lane.start[i];
      starts[i] = t;
      if (lane.dur[i] > longest) { longest = lane.dur[i]; }
    }
    lane.abs = starts;
    lane.longest = longest;
  }

  /* First index whose start is >= t. */
  function lowerBound(starts, t) {
    var lo = 0, hi = starts.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (starts[mid] < t) { lo = mid + 1; } else { hi = mid; } }
    return lo;
  }

  function Timeline(root, data) {
    var self = this;
    data.lanes.forEach(unpack);
    this.root = root;
    this.data = data;
    this.span = data.span_ns > 0 ? data.span_ns : 1;
    this.view = { t0: 0, t1: this.span };
    this.rows = [{ kind: "steps", label: "steps" }, { kind: "host", label: "host: loader, sync" }];
    data.lanes.forEach(function (lane) {
      self.rows.push({ kind: "lane", label: "GPU " + lane.device + " · stream " + lane.stream, lane: lane });
    });
    var toolbar = el("div", "tl-toolbar");
    function button(text, title, action) {
      var node = el("button", "", text);
      node.type = "button";
      node.title = title;
      node.addEventListener("click", action);
      toolbar.appendChild(node);
    }
    button("−", "zoom out", function () { self.zoom(2); });
    button("+", "zoom in", function () { self.zoom(0.5); });
    button("◀", "earlier", function () { self.pan(-0.25); });
    button("▶", "later", function () { self.pan(0.25); });
    button("All steps", "show every profiled step (or double-click)", function () { self.setView(0, self.span); });
    this.status = el("span", "tl-status");
    toolbar.appendChild(this.status);
    toolbar.appendChild(el("span", "tl-help",
      "drag across to zoom in · Ctrl+wheel zooms · Shift+wheel pans · double-click resets · " +
      "keys: + − ← → 0"));
    root.appendChild(toolbar);
    var legend = el("ul", "legend");
    KINDS.forEach(function (kind, k) {
      var item = el("li"), dot = el("i");
      dot.style.background = COLORS[k];
      item.appendChild(dot);
      item.appendChild(document.createTextNode(kind));
      legend.appendChild(item);
    });
    [["data loader", LOADER], ["blocking sync", SYNC]].forEach(function (pair) {
      var item = el("li"), dot = el("i");
      dot.style.background = pair[1];
      item.appendChild(dot);
      item.appendChild(document.createTextNode(pair[0]));
      legend.appendChild(item);
    });
    root.appendChild(legend);
    this.board = el("div", "tl-lanes");
    this.canvas = el("canvas", "tl-canvas kl-canvas");
    this.board.appendChild(this.canvas);
    this.selection = el("div", "tl-selection");
    this.board.appendChild(this.selection);
    root.appendChild(this.board);
    if (data.detail_end_ns !== null) {
      root.appendChild(el("p", "hint", "Each op is drawn up to " + fmtDur(data.detail_end_ns) + " (" +
        data.ops_drawn + " of " + data.ops_total + " ops, whole steps) to keep the file small; " +
        "the busy chart above covers every step."));
    }
    this.height = AXIS_H + this.rows.length * (ROW_H + ROW_GAP) + 4;
    this.canvas.style.height = this.height + "px";
    this.listen();
    this.draw();
  }

  Timeline.prototype.plotWidth = function () {
    return Math.max(this.root.clientWidth - GUTTER - PAD_R, 50);
  };
  Timeline.prototype.xOf = function (t) {
    return GUTTER + (t - this.view.t0) / (this.view.t1 - this.view.t0) * this.plotWidth();
  };
  Timeline.prototype.tOf = function (x) {
    return this.view.t0 + (x - GUTTER) / this.plotWidth() * (this.view.t1 - this.view.t0);
  };
  Timeline.prototype.rowTop = function (index) { return AXIS_H + index * (ROW_H + ROW_GAP); };

  Timeline.prototype.setView = function (t0, t1) {
    var span = Math.min(Math.max(t1 - t0, MIN_SPAN_NS), this.span);
    var start = Math.min(Math.max(t0, 0), this.span - span);
    this.view = { t0: start, t1: start + span };
    this.schedule();
  };
  Timeline.prototype.zoom = function (factor, at) {
    var v = this.view, c = at === undefined ? (v.t0 + v.t1) / 2 : at;
    this.setView(c - (c - v.t0) * factor, c + (v.t1 - c) * factor);
  };
  Timeline.prototype.pan = function (fraction) {
    var shift = (this.view.t1 - this.view.t0) * fraction;
    this.setView(this.view.t0 + shift, this.view.t1 + shift);
  };
  Timeline.prototype.schedule = function () {
    var self = this;
    if (this.pending) { return; }
    this.pending = true;
    window.requestAnimationFrame(function () { self.pending = false; self.draw(); });
  };

  /* Boxes [start, end) in ns; skips what would land on pixels already painted. */
  Timeline.prototype.boxes = function (ctx, count, startOf, endOf, colorOf, y, h) {
    var v = this.view, scale = this.plotWidth() / (v.t1 - v.t0), right = GUTTER + this.plotWidth();
    var painted = -1, drawn = 0;
    for (var i = 0; i < count; i++) {
      var s = startOf(i);
      if (s > v.t1) { break; }
      var e = endOf(i);
      if (e < v.t0) { continue; }
      var x0 = Math.max(GUTTER + (s - v.t0) * scale, GUTTER);
      var x1 = Math.min(GUTTER + (e - v.t0) * scale, right);
      x1 = Math.max(x1, x0 + 1);
      if (x1 <= painted) { continue; }
      x0 = Math.max(x0, painted);
      ctx.fillStyle = colorOf(i);
      ctx.fillRect(x0, y, x1 - x0, h);
      painted = Math.ceil(x1);
      drawn++;
    }
    return drawn;
  };

  Timeline.prototype.draw = function () {
    var self = this, data = this.data, v = this.view, ratio = window.devicePixelRatio || 1;
    var width = this.root.clientWidth;
    this.canvas.width = Math.round(width * ratio);
    this.canvas.height = Math.round(this.height * ratio);
    this.canvas.style.width = width + "px";
    var ctx = this.canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, this.height);
    ctx.font = "11px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    var plot = this.plotWidth(), right = GUTTER + plot;
    /* axis: ticks in time from the first step */
    var step = niceStep((v.t1 - v.t0) / Math.max(plot / 110, 1));
    ctx.fillStyle = "#333";
    ctx.strokeStyle = "#d5dbe1";
    for (var t = Math.ceil(v.t0 / step) * step; t <= v.t1; t += step) {
      var x = this.xOf(t);
      ctx.fillRect(x, AXIS_H - 5, 1, 5);
      ctx.fillText(fmtDur(t), x + 3, AXIS_H / 2);
    }
    var drawn = 0;
    this.rows.forEach(function (row, index) {
      var y = self.rowTop(index);
      ctx.fillStyle = "#f4f6f8";
      ctx.fillRect(GUTTER, y, plot, ROW_H);
      ctx.fillStyle = "#333";
      ctx.save();
      ctx.beginPath();
      ctx.rect(0, y, GUTTER - 6, ROW_H);
      ctx.clip();
      ctx.fillText(row.label, 4, y + ROW_H / 2);
      ctx.restore();
      if (row.kind === "steps") {
        var steps = data.steps;
        drawn += self.boxes(ctx, steps.length, function (i) { return steps[i][1]; },
          function (i) { return steps[i][2]; },
          function (i) { return i % 2 ? "#c9d3de" : "#dde4ec"; }, y, ROW_H);
        ctx.fillStyle = "#333";
        steps.forEach(function (s) {
          var x0 = Math.max(self.xOf(s[1]), GUTTER), x1 = Math.min(self.xOf(s[2]), right);
          if (x1 - x0 > 40) { ctx.fillText("#" + s[0], x0 + 3, y + ROW_H / 2); }
        });
      } else if (row.kind === "host") {
        [[data.loader, LOADER], [data.syncs, SYNC]].forEach(function (pair) {
          var calls = pair[0];
          drawn += self.boxes(ctx, calls.length, function (i) { return calls[i][0]; },
            function (i) { return calls[i][1]; }, function () { return pair[1]; }, y + 2, ROW_H - 4);
        });
      } else {
        var lane = row.lane, first = lowerBound(lane.abs, v.t0 - lane.longest);
        drawn += self.boxes(ctx, lane.abs.length - first, function (i) { return lane.abs[first + i]; },
          function (i) { return lane.abs[first + i] + lane.dur[first + i]; },
          function (i) { return COLORS[lane.kind[first + i]] || COLORS[0]; }, y, ROW_H);
      }
    });
    if (data.detail_end_ns !== null && data.detail_end_ns < v.t1) {
      var cut = Math.max(this.xOf(data.detail_end_ns), GUTTER);
      ctx.fillStyle = "rgba(120,120,120,.18)";
      ctx.fillRect(cut, AXIS_H, right - cut, this.height - AXIS_H);
    }
    this.status.textContent = fmtDur(v.t0) + " – " + fmtDur(v.t1) + " (" + fmtDur(v.t1 - v.t0) + " shown)";
    this.root.setAttribute("data-view", v.t0 + "," + v.t1);
    this.root.setAttribute("data-plot", GUTTER + "," + plot);
    this.root.setAttribute("data-drawn", String(drawn));
    this.root.setAttribute("data-rows", String(this.rows.length));
  };

  /* What lies under the pointer: a step, a host call or an op (within 2 px), as lines of text. */
  Timeline.prototype.describe = function (x, y) {
    var index = Math.floor((y - AXIS_H) / (ROW_H + ROW_GAP)), row = this.rows[index];
    if (!row || y - this.rowTop(index) > ROW_H) { return null; }
    var t = this.tOf(x), slack = 2 * (this.view.t1 - this.view.t0) / this.plotWidth();
    var data = this.data, lines = null;
    if (row.kind === "steps") {
      data.steps.forEach(function (s) {
        if (s[1] <= t && t < s[2]) { lines = ["step #" + s[0], fmtDur(s[2] - s[1])]; }
      });
    } else if (row.kind === "host") {
      [[data.loader, "data loader (host)"], [data.syncs, "blocking sync (host)"]].forEach(function (pair) {
        pair[0].forEach(function (c) {
          if (c[0] - slack <= t && t <= c[1] + slack) { lines = [pair[1], fmtDur(c[1] - c[0]) + " at " + fmtDur(c[0])]; }
        });
      });
    } else {
      var lane = row.lane, best = -1, bestGap = slack;
      for (var i = lowerBound(lane.abs, t - lane.longest - slack); i < lane.abs.length && lane.abs[i] <= t + slack; i++) {
        var s = lane.abs[i], e = s + lane.dur[i];
        var gap = t < s ? s - t : t > e ? t - e : 0;
        if (gap <= bestGap) { best = i; bestGap = gap; if (gap === 0) { break; } }
      }
      if (best >= 0) {
        lines = [data.names[lane.name[best]],
          KINDS[lane.kind[best]] + " · " + fmtDur(lane.dur[best]) + " at " + fmtDur(lane.abs[best]) +
          " · " + row.label];
      }
    }
    return lines;
  };

  Timeline.prototype.hover = function (event) {
    var box = this.canvas.getBoundingClientRect(), x = event.clientX - box.left, y = event.clientY - box.top;
    var lines = x >= GUTTER && !this.dragging ? this.describe(x, y) : null;
    if (!lines) { tip.style.display = "none"; return; }
    while (tip.firstChild) { tip.removeChild(tip.firstChild); }
    tip.appendChild(el("div", "tip-time", lines[0]));
    tip.appendChild(el("div", "tip-line", lines[1]));
    tip.style.display = "block";
    var left = event.clientX + 14;
    if (left + tip.offsetWidth > window.innerWidth - 4) { left = event.clientX - tip.offsetWidth - 14; }
    tip.style.left = left + "px";
    tip.style.top = Math.min(event.clientY + 14, window.innerHeight - tip.offsetHeight - 4) + "px";
  };

  Timeline.prototype.listen = function () {
    var self = this, board = this.board;
    this.canvas.addEventListener("mousemove", function (event) { self.hover(event); });
    this.canvas.addEventListener("mouseleave", function () { tip.style.display = "none"; });
    board.addEventListener("mousedown", function (event) {
      var box = board.getBoundingClientRect(), x = event.clientX - box.left;
      if (event.button !== 0 || x < GUTTER || x > GUTTER + self.plotWidth()) { return; }
      self.dragging = { x0: x, x1: x, left: box.left };
      event.preventDefault();
    });
    window.addEventListener("mousemove", function (event) {
      var d = self.dragging;
      if (!d) { return; }
      d.x1 = Math.min(Math.max(event.clientX - d.left, GUTTER), GUTTER + self.plotWidth());
      self.selection.style.display = "block";
      self.selection.style.left = Math.min(d.x0, d.x1) + "px";
      self.selection.style.width = Math.abs(d.x1 - d.x0) + "px";
    });
    window.addEventListener("mouseup", function () {
      var d = self.dragging;
      if (!d) { return; }
      self.dragging = null;
      self.selection.style.display = "none";
      var a = Math.min(d.x0, d.x1), b = Math.max(d.x0, d.x1);
      if (b - a >= 5) { self.setView(self.tOf(a), self.tOf(b)); }
    });
    board.addEventListener("dblclick", function () { self.setView(0, self.span); });
    board.addEventListener("wheel", function (event) {
      var x = event.clientX - board.getBoundingClientRect().left;
      if (event.ctrlKey || event.metaKey) {
        event.preventDefault();
        self.zoom(event.deltaY > 0 ? 1.25 : 0.8, self.tOf(x));
      } else if (event.shiftKey) {
        event.preventDefault();
        self.pan((event.deltaY || event.deltaX) > 0 ? 0.1 : -0.1);
      }
    }, { passive: false });
    this.root.addEventListener("keydown", function (event) {  /* as the run's timeline */
      var keys = { "+": function () { self.zoom(0.5); }, "=": function () { self.zoom(0.5); },
        "-": function () { self.zoom(2); }, ArrowLeft: function () { self.pan(-0.25); },
        ArrowRight: function () { self.pan(0.25); }, "0": function () { self.setView(0, self.span); },
        Home: function () { self.setView(0, self.span); } };
      if (keys[event.key]) { keys[event.key](); event.preventDefault(); }
    });
    window.addEventListener("resize", function () { self.schedule(); });
  };

  var roots = document.querySelectorAll(".kl[data-index]");
  for (var i = 0; i < roots.length; i++) {
    var data = RANKS[Number(roots[i].getAttribute("data-index"))];
    if (data) { roots[i].timeline = new Timeline(roots[i], data); }
  }
}());
