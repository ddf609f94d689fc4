/* Data-page behaviour (core/_data_page_head.html): draw Plotly charts (also after htmx swaps) and link diff items <-> tool calls. */
(function () {
  "use strict";

  /* Plotly (0.5 MB gzipped) is fetched only when the page has a chart to draw: pages that may
     show charts name the bundle in <meta name="tb-plotly"> (core/_charts_head.html). */
  var plotlyLoading = false;
  function loadPlotly() {
    var meta = document.querySelector('meta[name="tb-plotly"]');
    if (!meta || plotlyLoading) { return; }
    plotlyLoading = true;
    var script = document.createElement("script");
    script.src = meta.content;
    script.onload = function () { renderCharts(document); };
    document.head.appendChild(script);
  }

  function renderCharts(root) {
    var charts = Array.prototype.filter.call(root.querySelectorAll("[data-chart]"), function (el) {
      return document.getElementById(el.dataset.chart);
    });
    if (!charts.length) { return; }
    if (!window.Plotly) { loadPlotly(); return; }  // draws every chart of the page once loaded
    charts.forEach(function (el) {
      var source = document.getElementById(el.dataset.chart);
      var spec = JSON.parse(source.textContent);
      window.Plotly.newPlot(el, spec.figure.data, spec.figure.layout, spec.config);
      el.dataset.rendered = "1";
    });
  }

  function clearHighlights() {
    document.querySelectorAll(".highlight").forEach(function (el) { el.classList.remove("highlight"); });
  }

  function highlight(ids) {
    clearHighlights();
    var first = null;
    ids.forEach(function (id) {
      var el = document.getElementById(id);
      if (el) { el.classList.add("highlight"); first = first || el; }
    });
    if (first) { first.scrollIntoView({behavior: "smooth", block: "center"}); }
  }

  function ids(list, prefix) {
    return (list || "").split(" ").filter(Boolean).map(function (i) { return prefix + i; });
  }

  document.addEventListener("click", function (event) {
    var item = event.target.closest(".diff-item[data-calls]");
    if (item) { highlight(ids(item.dataset.calls, "call-")); item.classList.add("highlight"); return; }
    var call = event.target.closest(".tool-call[data-diff-items]");
    if (call && !event.target.closest("a, summary")) {
      highlight(ids(call.dataset.diffItems, "diff-")); call.classList.add("highlight");
    }
  });

  /* Client-side sort of a fully rendered table[data-sortable]: each header becomes a button (keyboard
     reachable); cells sort by data-sort (numbers when every value parses, text otherwise). */
  function sortable(root) {
    root.querySelectorAll("table[data-sortable]:not([data-sort-ready])").forEach(function (table) {
      table.dataset.sortReady = "1";
      table.querySelectorAll("thead th").forEach(function (th, column) {
        var button = document.createElement("button");
        button.type = "button";
        button.className = "th-sort";
        while (th.firstChild && !(th.firstChild.classList && th.firstChild.classList.contains("term"))) {
          button.appendChild(th.firstChild);
        }
        th.insertBefore(button, th.firstChild);
        th.setAttribute("aria-sort", "none");
        button.addEventListener("click", function () { sortBy(table, th, column); });
      });
    });
  }

  function sortKey(cell, numeric) {
    var raw = cell ? (cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent.trim()) : "";
    return numeric ? (raw === "" ? null : parseFloat(raw)) : raw.toLowerCase();
  }

  function sortBy(table, th, column) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows).filter(function (row) { return row.cells.length > 1; });
    var numeric = th.dataset.sortType !== "text" && rows.every(function (row) {
      var key = sortKey(row.cells[column], false);
      return key === "" || !isNaN(parseFloat(key));
    });
    var descending = th.getAttribute("aria-sort") !== "descending";
    table.querySelectorAll("thead th").forEach(function (other) { other.setAttribute("aria-sort", "none"); });
    th.setAttribute("aria-sort", descending ? "descending" : "ascending");
    rows.sort(function (x, y) {
      var a = sortKey(x.cells[column], numeric), b = sortKey(y.cells[column], numeric);
      if (a === null || a === "") { return 1; }
      if (b === null || b === "") { return -1; }
      var order = a < b ? -1 : (a > b ? 1 : 0);
      return descending ? -order : order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  }

  document.addEventListener("DOMContentLoaded", function () { renderCharts(document); sortable(document); });
  document.addEventListener("htmx:afterSwap", function (event) {
    renderCharts(event.detail.target); sortable(document);
  });
})();
