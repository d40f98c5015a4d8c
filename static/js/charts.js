/* Every dashboard chart, drawn from a json_script block named by the element's data-chart-data.
 * No inline script anywhere (the Content-Security-Policy forbids it): an element
 * <div data-chart="KIND" data-chart-data="ID"> is drawn on load and after each htmx swap.
 * Each chart sits next to a table or a sentence that says the same thing in words. */
(function () {
  "use strict";
  var GOOD = "#067647", BAD = "#b42318", SAME = "#667085", ACCENT = "#2f5fd0", WARN = "#b54708";
  var CONFIG = {displaylogo: false, responsive: true, displayModeBar: false};
  var EPSILON = 1e-9;

  function data(el) {
    var source = document.getElementById(el.getAttribute("data-chart-data"));
    return source ? JSON.parse(source.textContent) : null;
  }

  // the container takes the chart's height: a resize (responsive) then keeps the drawn size
  // instead of shrinking the chart to the box's CSS minimum and clipping its lower panels
  function plot(el, traces, layout) {
    if (layout.height) { el.style.height = layout.height + "px"; }
    Plotly.newPlot(el, traces, layout, CONFIG);
  }

  function human(name) { return String(name).replace(/_/g, " "); }

  // Candidate signals, admitted vs not admitted: a strip of points per signal with a median tick
  // (scatter only, so the small plotly build draws it).
  function signals(el, d) {
    var traces = [];
    [["admitted", GOOD, -0.18, "circle"], ["rejected", BAD, 0.18, "x"]].forEach(function (spec) {
      var name = spec[0], xs = [], ys = [], mx = [], my = [];
      d.signals.forEach(function (s, i) {
        var values = d[name][s] || [];
        values.forEach(function (v, k) {
          // deterministic jitter: the same trace always draws the same picture
          xs.push(i + spec[2] + (((k * 37) % 11) - 5) * 0.012);
          ys.push(v);
        });
        if (values.length) {
          var sorted = values.slice().sort(function (a, b) { return a - b; });
          var mid = Math.floor(sorted.length / 2);
          mx.push(i + spec[2]);
          my.push(sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2);
        }
      });
      var label = name === "rejected" ? "not admitted" : name;
      traces.push({type: "scatter", mode: "markers", name: label, x: xs, y: ys,
        marker: {color: spec[1], size: 5, symbol: spec[3], opacity: 0.7},
        hovertemplate: label + " %{y:.3f}<extra></extra>"});
      traces.push({type: "scatter", mode: "markers", name: label + " median", x: mx, y: my, showlegend: false,
        marker: {color: spec[1], size: 22, symbol: "line-ew", line: {width: 3, color: spec[1]}},
        hovertemplate: label + " median %{y:.3f}<extra></extra>"});
    });
    plot(el, traces, {
      title: {text: "Signals: admitted (●) vs not admitted (×); ticks mark medians", font: {size: 13}},
      margin: {t: 40, b: 30, l: 70, r: 10}, height: 340, legend: {orientation: "h", y: -0.35},
      xaxis: {tickvals: d.signals.map(function (_, i) { return i; }), ticktext: d.signals.map(human),
              automargin: true, tickangle: -30},
      yaxis: {range: [-0.05, 1.05], automargin: true}
    });
  }

  function stages(el, d) {
    var colours = {admitted: GOOD, folded: "#5b8def", rejected: BAD, budget_omitted: WARN};
    var bars = Object.keys(d.series).map(function (k) {
      return {type: "bar", name: human(k), x: d.stages.map(human), y: d.series[k], marker: {color: colours[k]}};
    });
    plot(el, bars, {barmode: "stack", title: {text: "Candidates decided per stage", font: {size: 13}},
      margin: {t: 40, b: 30, l: 40, r: 10}, height: 320, legend: {orientation: "h", y: -0.3},
      xaxis: {automargin: true}, yaxis: {automargin: true}});
  }

  // Evaluation ladder: one small chart per metric, the oracle as a dashed line.
  function ladder(el, chart) {
    var traces = [{x: chart.x, y: chart.y, type: "scatter", mode: "lines+markers", name: "ladder", line: {color: ACCENT}}];
    var shapes = [], annotations = [];
    if (chart.oracle !== null) {
      shapes.push({type: "line", xref: "paper", x0: 0, x1: 1, y0: chart.oracle, y1: chart.oracle,
                   line: {dash: "dash", color: GOOD, width: 2}});
      annotations.push({xref: "paper", x: 0, y: chart.oracle, showarrow: false, yanchor: "bottom", xanchor: "left",
        text: "oracle " + chart.oracle.toFixed(chart.metric === "tokens" ? 0 : 3), font: {color: GOOD, size: 11}});
    }
    plot(el, traces, {
      title: {text: chart.title, font: {size: 14}}, height: 260, margin: {l: 45, r: 10, t: 35, b: 30},
      showlegend: false, shapes: shapes, annotations: annotations,
      xaxis: {automargin: true},
      yaxis: chart.metric === "tokens" ? {rangemode: "tozero", automargin: true} : {range: [-0.02, 1.05], automargin: true}
    });
  }

  function ladders(el, charts) {
    charts.forEach(function (chart) {
      var target = document.getElementById("chart-" + chart.metric);
      if (target) { ladder(target, chart); }
    });
  }

  // Backtest per-task deltas: one panel per metric that changed, every panel on the same y-scale
  // (the page says so), a metric that changed nowhere named as "no change" instead of drawn.
  function deltas(el, d) {
    var changed = d.series.filter(function (s) {
      return s.deltas.some(function (v) { return v !== null && Math.abs(v) > EPSILON; });
    });
    if (!changed.length) { el.hidden = true; return; }
    function largest(s) {
      return s.deltas.reduce(function (m, v) { return v === null ? m : Math.max(m, Math.abs(v)); }, 0);
    }
    var own = d.own_scale || [], shared = (d.largest || 0) * 1.15;
    var n = changed.length, traces = [], annotations = [], layout = {
      grid: {rows: n, columns: 1, pattern: "coupled", ygap: 0.35}, showlegend: false, bargap: 0.3,
      height: 90 + 160 * n, margin: {l: 50, r: 20, t: 24, b: 20}
    };
    changed.forEach(function (s, i) {
      var axis = i === 0 ? "" : String(i + 1);
      traces.push({type: "bar", x: d.tasks, y: s.deltas, name: s.metric, xaxis: "x", yaxis: "y" + axis,
        marker: {color: s.deltas.map(function (v) { return v > EPSILON ? GOOD : (v < -EPSILON ? BAD : SAME); })},
        hovertemplate: "%{x}<br>" + s.metric + " Δ %{y:+.3f}<extra></extra>"});
      // the panel's name above it, horizontal: a rotated axis title longer than the panel is cut
      annotations.push({text: "<b>Δ " + human(s.metric) + "</b>" + (own.indexOf(s.metric) >= 0 ? " (own scale)" : ""),
        xref: "paper", x: 0, xanchor: "left", yref: "y" + axis + " domain", y: 1, yanchor: "bottom",
        showarrow: false, font: {size: 12}});
      layout["yaxis" + axis] = {range: own.indexOf(s.metric) >= 0 ? [-largest(s) * 1.15, largest(s) * 1.15] : [-shared, shared],
        zeroline: true, zerolinecolor: "#5b6575", automargin: true};
    });
    layout.xaxis = {automargin: true, tickangle: -40};
    layout.annotations = annotations;
    plot(el, traces, layout);
  }

  var KINDS = {signals: signals, stages: stages, ladders: ladders, deltas: deltas};

  // plotly (1.1 MB parsed) is fetched only when a chart comes near the screen: a trace page whose
  // charts sit below its tables costs no plotly on a first visit that never scrolls to them
  var PLOTLY = (document.currentScript && document.currentScript.getAttribute("data-plotly")) || null;
  var loading = null;

  function withPlotly(then) {
    if (typeof Plotly !== "undefined") { then(); return; }
    if (!PLOTLY) { return; }
    if (!loading) {
      loading = new Promise(function (resolve, reject) {
        var tag = document.createElement("script");
        tag.src = PLOTLY;
        tag.onload = resolve;
        tag.onerror = reject;
        document.head.appendChild(tag);
      });
    }
    loading.then(then);
  }

  function drawOne(el) {
    if (el.hasAttribute("data-drawn")) { return; }
    var kind = KINDS[el.getAttribute("data-chart")], d = data(el);
    el.setAttribute("data-drawn", "");
    if (kind && d !== null) { kind(el, d); }
  }

  var watcher = "IntersectionObserver" in window ? new IntersectionObserver(function (entries) {
    entries.forEach(function (entry) {
      if (!entry.isIntersecting) { return; }
      watcher.unobserve(entry.target);
      withPlotly(function () { drawOne(entry.target); });
    });
  }, {rootMargin: "600px 0px"}) : null;

  function draw(root) {
    (root || document).querySelectorAll("[data-chart]:not([data-drawn])").forEach(function (el) {
      if (watcher) { watcher.observe(el); } else { withPlotly(function () { drawOne(el); }); }
    });
  }

  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.addEventListener("htmx:afterSettle", function (event) { draw(event.target); });
})();
