// cooplab view: interactive plots, drawn in the browser from the numbers the server put in each
// <figure class="plot" data-plot="{...}"> (JSON, escaped by the template). Hover shows the values at
// the nearest x; drag across the plot to zoom in on that stretch of x, double-click (or "reset
// zoom") to see all of it again; click a legend entry to hide or show its line.
//
// Written for this page's Content-Security-Policy: no inline script, no eval, no innerHTML. Every
// label from a run goes in through textContent; sizes through SVG attributes and the CSSOM.
// Self-written, no library: the page works offline.
"use strict";
(function () {
  var SVG = "http://www.w3.org/2000/svg";
  var HEIGHT = 300;
  var uid = 0;

  function el(name, attrs, parent) {
    var e = document.createElementNS(SVG, name);
    for (var k in attrs) if (Object.prototype.hasOwnProperty.call(attrs, k)) e.setAttribute(k, String(attrs[k]));
    if (parent) parent.appendChild(e);
    return e;
  }
  function html(name, cls, parent, text) {
    var e = document.createElement(name);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  // a number as the page shows it: 4 significant digits, whole from 1,000 to 10^9
  function fmt(v) {
    if (v === null || v === undefined || !isFinite(v)) return "\u2014";
    var a = Math.abs(v);
    if (v === 0) return "0";
    if (a >= 1e9 || a < 1e-4) return v.toExponential(3).replace(/\.?0+e/, "e");
    if (a >= 1000) return String(Math.round(v));
    return String(Number(v.toPrecision(4)));
  }
  function niceTicks(lo, hi, n, integer) {
    if (!(hi > lo)) { hi = lo + 1; lo = lo - 1; }
    var span = hi - lo, step = Math.pow(10, Math.floor(Math.log10(span / n)));
    var err = n / (span / step);
    if (err <= 0.15) step *= 10; else if (err <= 0.35) step *= 5; else if (err <= 0.75) step *= 2;
    if (integer) step = Math.max(1, Math.round(step));
    var out = [], v = Math.ceil(lo / step) * step;
    for (var i = 0; v <= hi + step * 1e-9 && i < 50; i++, v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
    return out;
  }

  function Chart(fig, data) {
    this.fig = fig; this.d = data; this.id = "p" + (++uid);
    this.hidden = {};
    var xs = data.x.filter(function (v) { return v !== null && isFinite(v); });
    var cat = data.categorical || data.kind === "bar";
    this.M = { l: 62, r: 14, t: 12, b: data.categorical ? 86 : 46 };  // room for slanted category names
    this.full = cat ? [-0.5, data.x.length - 0.5] : [Math.min.apply(null, xs), Math.max.apply(null, xs)];
    if (this.full[0] === this.full[1]) this.full = [this.full[0] - 1, this.full[1] + 1];
    else if (!cat) { var pad = (this.full[1] - this.full[0]) * 0.02; this.full = [this.full[0] - pad, this.full[1] + pad]; }
    this.view = this.full.slice();
    this.box = html("div", "chart", null);
    this.tip = html("div", "tip", null);
    this.tip.hidden = true;
    this.tools = html("div", "tools", null);
    this.reset = html("button", "reset", this.tools, "reset zoom");
    this.reset.type = "button";
    this.reset.hidden = true;
    this.legend = html("ul", "legend", null);
    var holder = fig.querySelector(".chart-holder") || fig;
    holder.appendChild(this.tools);
    holder.appendChild(this.box);
    holder.appendChild(this.tip);
    holder.appendChild(this.legend);
    var self = this;
    this.reset.addEventListener("click", function () { self.zoom(self.full[0], self.full[1]); });
    this.buildLegend();
    this.draw();
    fig.setAttribute("data-drawn", "1");
  }

  Chart.prototype.colourOf = function (label) {
    var s = this.d.series;
    for (var i = 0; i < s.length; i++) if (s[i].label === label) return s[i].colour;
    return "#555";
  };

  Chart.prototype.buildLegend = function () {
    var self = this, items = [];
    this.d.series.forEach(function (s) { items.push({ label: s.label, colour: s.colour, dashed: s.dashed }); });
    (this.d.bands || []).forEach(function (b) { if (!items.some(function (i) { return i.label === b.label; })) items.push({ label: b.label, colour: b.colour, band: true }); });
    (this.d.scatter || []).forEach(function (p) { if (!items.some(function (i) { return i.label === p.label; })) items.push({ label: p.label, colour: p.colour, dot: true }); });
    if (items.length < 2 && !(this.d.bands || []).length) return;
    items.forEach(function (it) {
      var li = html("li", null, self.legend);
      var b = html("button", "key", li);
      b.type = "button";
      b.setAttribute("aria-pressed", "true");
      var sw = html("span", "swatch" + (it.dashed ? " dashed" : "") + (it.band ? " band" : "") + (it.dot ? " dot" : ""), b);
      sw.style.backgroundColor = it.colour;
      html("span", "label", b, it.label);
      b.addEventListener("click", function () {
        self.hidden[it.label] = !self.hidden[it.label];
        b.setAttribute("aria-pressed", self.hidden[it.label] ? "false" : "true");
        li.classList.toggle("off", !!self.hidden[it.label]);
        self.draw();
      });
    });
  };

  Chart.prototype.yRange = function () {
    var d = this.d, lo = Infinity, hi = -Infinity, v = this.view, self = this;
    function take(x, y) { if (y !== null && isFinite(y) && x >= v[0] - 0.5 && x <= v[1] + 0.5) { if (y < lo) lo = y; if (y > hi) hi = y; } }
    d.series.forEach(function (s) { if (!self.hidden[s.label]) s.y.forEach(function (y, i) { take(d.x[i], y); }); });
    (d.bands || []).forEach(function (b) { if (!self.hidden[b.label]) { b.lo.forEach(function (y, i) { take(d.x[i], y); }); b.hi.forEach(function (y, i) { take(d.x[i], y); }); } });
    (d.scatter || []).forEach(function (p) { if (!self.hidden[p.label]) p.x.forEach(function (x, i) { take(x, p.y[i]); }); });
    if (d.kind === "bar") { lo = Math.min(lo, 0); hi = Math.max(hi, 0); }
    if (lo === Infinity) { lo = 0; hi = 1; }
    if (lo === hi) { lo -= Math.abs(lo) * 0.1 || 1; hi += Math.abs(hi) * 0.1 || 1; }
    var pad = (hi - lo) * 0.06;
    return [d.kind === "bar" && lo === 0 ? 0 : lo - pad, hi + pad];
  };

  Chart.prototype.draw = function () {
    var d = this.d, self = this, M = this.M;
    while (this.box.firstChild) this.box.removeChild(this.box.firstChild);
    var W = Math.max(320, Math.min(this.box.clientWidth || this.fig.clientWidth || 700, 1400));
    var w = W - M.l - M.r, h = HEIGHT - M.t - M.b;
    var svg = el("svg", { width: W, height: HEIGHT, viewBox: "0 0 " + W + " " + HEIGHT, role: "img", "class": "chart-svg" }, this.box);
    var title = el("title", {}, svg);
    title.textContent = d.title || d.ylabel || "plot";
    var yr = this.yRange(), v = this.view;
    var X = function (x) { return M.l + (x - v[0]) / (v[1] - v[0]) * w; };
    var Y = function (y) { return M.t + h - (y - yr[0]) / (yr[1] - yr[0]) * h; };
    this.X = X; this.W = w; this.Y = Y;
    var clip = el("clipPath", { id: this.id + "-clip" }, el("defs", {}, svg));
    el("rect", { x: M.l, y: M.t, width: w, height: h }, clip);
    var grid = el("g", { "class": "grid" }, svg);
    niceTicks(yr[0], yr[1], 5, false).forEach(function (t) {
      el("line", { x1: M.l, x2: M.l + w, y1: Y(t), y2: Y(t), stroke: "#e3e7ee" }, grid);
      var lab = el("text", { x: M.l - 6, y: Y(t) + 4, "text-anchor": "end", "class": "tick" }, grid);
      lab.textContent = fmt(t);
    });
    if (d.categorical || d.kind === "bar") {
      var every = Math.max(1, Math.ceil(d.x.length / 24));
      d.x.forEach(function (x, i) {
        if (i % every || x < v[0] || x > v[1]) return;
        var t = el("text", { x: X(x), y: M.t + h + 14, "text-anchor": d.categorical ? "end" : "middle", "class": "tick",
                             transform: d.categorical ? "rotate(-25 " + X(x) + " " + (M.t + h + 14) + ")" : "" }, grid);
        t.textContent = d.xticks ? d.xticks[i] : fmt(x);
      });
    } else {
      niceTicks(v[0], v[1], 8, d.integer_x).forEach(function (t) {
        el("line", { x1: X(t), x2: X(t), y1: M.t, y2: M.t + h, stroke: "#f0f2f6" }, grid);
        var lab = el("text", { x: X(t), y: M.t + h + 14, "text-anchor": "middle", "class": "tick" }, grid);
        lab.textContent = fmt(t);
      });
    }
    el("rect", { x: M.l, y: M.t, width: w, height: h, fill: "none", stroke: "#b8c0cc" }, svg);
    var xl = el("text", { x: M.l + w / 2, y: HEIGHT - 6, "text-anchor": "middle", "class": "axis" }, svg);
    xl.textContent = d.xlabel || "";
    var yl = el("text", { x: 14, y: M.t + h / 2, "text-anchor": "middle", "class": "axis", transform: "rotate(-90 14 " + (M.t + h / 2) + ")" }, svg);
    yl.textContent = d.ylabel || "";
    var g = el("g", { "clip-path": "url(#" + this.id + "-clip)" }, svg);
    var whisk = d.categorical || d.kind === "bar" || d.kind === "points";
    // marks: a grey band over an x range ("to" given) or a dotted red line at one x, each labelled at the top
    (d.marks || []).forEach(function (m, k) {
      if (m.x === null || !isFinite(m.x)) return;
      var banded = m.to !== null && m.to !== undefined && isFinite(m.to);
      if (banded) {
        var a = X(Math.min(m.x, m.to)), b = X(Math.max(m.x, m.to));
        el("rect", { x: a, y: M.t, width: Math.max(b - a, 0), height: h, fill: "#8a94a3", "fill-opacity": 0.16, "class": "mark mark-band" }, g);
      } else {
        el("line", { x1: X(m.x), x2: X(m.x), y1: M.t, y2: M.t + h, stroke: "#c0392b", "stroke-width": 1.4, "stroke-dasharray": "2 3",
                     "class": "mark mark-line" }, g);
      }
      if (!m.label) return;
      var at = banded ? Math.max(X(Math.min(m.x, m.to)), M.l) + 4 : X(m.x) + 4;
      if (at < M.l || at > M.l + w) return;
      var t = el("text", { x: at, y: M.t + 12 + 13 * k, "class": "mark-label", fill: banded ? "#4b5563" : "#c0392b" }, svg);
      t.textContent = m.label;
    });
    (d.bands || []).forEach(function (b) {
      if (self.hidden[b.label]) return;
      if (whisk) {
        d.x.forEach(function (x, i) {
          if (b.lo[i] === null || b.hi[i] === null) return;
          el("line", { x1: X(x), x2: X(x), y1: Y(b.lo[i]), y2: Y(b.hi[i]), stroke: b.colour, "stroke-width": 2, "class": "band" }, g);
          [b.lo[i], b.hi[i]].forEach(function (y) { el("line", { x1: X(x) - 5, x2: X(x) + 5, y1: Y(y), y2: Y(y), stroke: b.colour, "stroke-width": 2 }, g); });
        });
        return;
      }
      var runs = [], cur = [];
      d.x.forEach(function (x, i) {
        if (b.lo[i] === null || b.hi[i] === null) { if (cur.length) runs.push(cur); cur = []; } else cur.push(i);
      });
      if (cur.length) runs.push(cur);
      runs.forEach(function (idx) {
        var pts = idx.map(function (i) { return X(d.x[i]) + "," + Y(b.hi[i]); })
          .concat(idx.slice().reverse().map(function (i) { return X(d.x[i]) + "," + Y(b.lo[i]); }));
        el("polygon", { points: pts.join(" "), fill: b.colour, "fill-opacity": 0.18, stroke: "none", "class": "band" }, g);
      });
    });
    var nbar = d.series.filter(function (s) { return !self.hidden[s.label]; }).length, bi = 0;
    d.series.forEach(function (s) {
      if (self.hidden[s.label]) return;
      if (d.kind === "bar") {
        var bw = (X(1) - X(0)) * 0.8 / Math.max(nbar, 1);
        s.y.forEach(function (y, i) {
          if (y === null) return;
          var x0 = X(d.x[i]) - (X(1) - X(0)) * 0.4 + bi * bw;
          el("rect", { x: x0, y: Math.min(Y(y), Y(0)), width: Math.max(bw - 1, 1), height: Math.abs(Y(y) - Y(0)), fill: s.colour, "class": "bar" }, g);
        });
        bi++;
        return;
      }
      var path = "", pen = false;
      s.y.forEach(function (y, i) {
        if (y === null || d.x[i] === null) { pen = false; return; }
        var px = X(d.x[i]), py = Y(y);
        if (d.kind === "step" && pen && i > 0) {
          var mid = X((d.x[i - 1] + d.x[i]) / 2);
          path += " H" + mid.toFixed(1) + " V" + py.toFixed(1) + " H" + px.toFixed(1);
        } else {
          path += (pen ? " L" : " M") + px.toFixed(1) + "," + py.toFixed(1);
        }
        pen = true;
      });
      if (d.kind !== "points" && path) {
        el("path", { d: path, fill: "none", stroke: s.colour, "stroke-width": s.width || 1.6, "stroke-dasharray": s.dashed ? "6 4" : "none",
                     "stroke-linejoin": "round", "class": "line" }, g);
      }
      if (d.kind === "points" || d.x.length <= 40) {
        s.y.forEach(function (y, i) {
          if (y !== null && d.x[i] !== null) el("circle", { cx: X(d.x[i]), cy: Y(y), r: d.kind === "points" ? 4 : 2.5, fill: s.colour, "class": "dot" }, g);
        });
      }
    });
    (d.scatter || []).forEach(function (p) {
      if (self.hidden[p.label]) return;
      p.x.forEach(function (x, i) {
        if (p.y[i] !== null) el("circle", { cx: X(x), cy: Y(p.y[i]), r: 2.6, fill: "none", stroke: p.colour, "stroke-width": 1.2, "class": "seed" }, g);
      });
    });
    this.cross = el("line", { x1: 0, x2: 0, y1: M.t, y2: M.t + h, stroke: "#667", "stroke-dasharray": "3 3", visibility: "hidden" }, svg);
    this.sel = el("rect", { x: 0, y: M.t, width: 0, height: h, fill: "#2f5fb3", "fill-opacity": 0.12, visibility: "hidden", "class": "selection" }, svg);
    var over = el("rect", { x: M.l, y: M.t, width: w, height: h, fill: "transparent", "class": "overlay" }, svg);
    this.listen(over, svg);
  };

  // the data index nearest to the pointer's x (within the view), or -1
  Chart.prototype.nearest = function (px) {
    var d = this.d, best = -1, dist = Infinity, self = this;
    d.x.forEach(function (x, i) {
      if (x === null || x < self.view[0] - 0.5 || x > self.view[1] + 0.5) return;
      var dd = Math.abs(self.X(x) - px);
      if (dd < dist) { dist = dd; best = i; }
    });
    return best;
  };

  Chart.prototype.show = function (i, px, py) {
    var d = this.d, self = this, tip = this.tip;
    while (tip.firstChild) tip.removeChild(tip.firstChild);
    if (i < 0) { tip.hidden = true; this.cross.setAttribute("visibility", "hidden"); return; }
    var xname = d.xticks ? d.xticks[i] : fmt(d.x[i]);
    html("div", "tip-x", tip, (d.xlabel ? d.xlabel + " " : "") + xname);
    d.series.forEach(function (s) {
      if (self.hidden[s.label]) return;
      var row = html("div", "tip-row", tip);
      var sw = html("span", "swatch", row);
      sw.style.backgroundColor = s.colour;
      var text = s.label + ": " + fmt(s.y[i]);
      (d.bands || []).forEach(function (b) {
        if (b.label === s.label && b.lo[i] !== null && b.hi[i] !== null) text += " (" + fmt(b.lo[i]) + " to " + fmt(b.hi[i]) + ")";
      });
      html("span", null, row, text);
    });
    var x = this.X(d.x[i]);
    this.cross.setAttribute("x1", x); this.cross.setAttribute("x2", x); this.cross.setAttribute("visibility", "visible");
    tip.hidden = false;
    var left = Math.min(px + 14, (this.box.clientWidth || 700) - 220);
    tip.style.left = Math.max(0, left) + "px";
    tip.style.top = Math.max(0, py - 10) + "px";
  };

  Chart.prototype.zoom = function (a, b) {
    var lo = Math.max(Math.min(a, b), this.full[0]), hi = Math.min(Math.max(a, b), this.full[1]);
    if (!(hi > lo)) return;
    this.view = [lo, hi];
    var zoomed = lo > this.full[0] || hi < this.full[1];
    this.reset.hidden = !zoomed;
    this.fig.setAttribute("data-zoom", zoomed ? fmt(lo) + " to " + fmt(hi) : "");
    this.tip.hidden = true;
    this.draw();
  };

  Chart.prototype.listen = function (over, svg) {
    var self = this, start = null, M = this.M;
    function px(e) {
      var r = svg.getBoundingClientRect();
      return { x: e.clientX - r.left, y: e.clientY - r.top };
    }
    over.addEventListener("mousemove", function (e) {
      var p = px(e);
      if (start !== null) {
        self.sel.setAttribute("x", Math.min(start, p.x)); self.sel.setAttribute("width", Math.abs(p.x - start));
        self.sel.setAttribute("visibility", "visible");
      }
      self.show(self.nearest(p.x), p.x, p.y);
    });
    over.addEventListener("mouseleave", function () { self.show(-1); });
    over.addEventListener("mousedown", function (e) { start = px(e).x; e.preventDefault(); });
    over.addEventListener("mouseup", function (e) {
      var end = px(e).x, a = start;
      start = null;
      self.sel.setAttribute("visibility", "hidden");
      if (a !== null && Math.abs(end - a) > 6) {
        var inv = function (p) { return self.view[0] + (p - M.l) / self.W * (self.view[1] - self.view[0]); };
        self.zoom(inv(a), inv(end));
      }
    });
    over.addEventListener("dblclick", function () { self.zoom(self.full[0], self.full[1]); });
  };

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("figure.plot[data-plot]").forEach(function (fig) {
      var data;
      try { data = JSON.parse(fig.getAttribute("data-plot")); } catch (e) { data = null; }
      if (!data || !Array.isArray(data.x) || !Array.isArray(data.series)) {
        fig.setAttribute("data-drawn", "0");
        return;
      }
      var old = fig.querySelector(".no-script");
      if (old) old.parentNode.removeChild(old);
      fig.chart = new Chart(fig, data);
    });
  });
})();
