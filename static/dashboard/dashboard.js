/* Dashboard behaviour: draw Plotly charts (also after htmx swaps) and link diff items <-> tool calls. */
(function () {
  "use strict";

  function renderCharts(root) {
    if (!window.Plotly) { return; }
    root.querySelectorAll("[data-chart]").forEach(function (el) {
      var source = document.getElementById(el.dataset.chart);
      if (!source) { return; }
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

  document.addEventListener("DOMContentLoaded", function () { renderCharts(document); });
  document.addEventListener("htmx:afterSwap", function (event) { renderCharts(event.detail.target); });
})();
