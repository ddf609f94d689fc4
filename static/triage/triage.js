/* Triage keys in the drilldown (j/k walk the queue, digits toggle labels, y/n answer the highlighted rubric)
   and tick-all in the queue. */
(function () {
  "use strict";

  function typing(target) {
    return target.closest("input, textarea, select, [contenteditable]") !== null;
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) { return; }
    var panel = document.getElementById("triage-panel");
    if (!panel) { return; }
    if (event.key === "j" && panel.dataset.next) { window.location.href = panel.dataset.next; return; }
    if (event.key === "k" && panel.dataset.prev) { window.location.href = panel.dataset.prev; return; }
    if ((event.key === "y" || event.key === "n") && panel.dataset.canEdit) {
      var answer = panel.querySelector('.rubric-verdict[data-current] button[value="' + (event.key === "y" ? "yes" : "no") + '"]');
      if (answer) { event.preventDefault(); answer.click(); }
      return;
    }
    if (/^[1-9]$/.test(event.key) && panel.dataset.canEdit) {
      var button = panel.querySelector('button.label-toggle[data-shortcut="' + event.key + '"]');
      if (button) { event.preventDefault(); button.click(); }
    }
  });

  document.addEventListener("change", function (event) {
    if (!event.target.matches("[data-tick-all]")) { return; }
    var table = event.target.closest("table");
    var name = event.target.dataset.tickAll || "a";
    table.querySelectorAll('input[name="' + name + '"]').forEach(function (box) { box.checked = event.target.checked; });
  });
})();
