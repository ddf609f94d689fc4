/* Triage keys in the drilldown and tick-all in the queue.
   j/k walk the queue the user came from; 1–9 toggle a label; Shift+1–9 label and go to the next
   attempt; r marks reviewed; y/n answer the highlighted rubric. Keys pressed while the panel loads or
   saves are queued and replayed in order once it is ready, so no key press is lost. */
(function () {
  "use strict";

  var pending = [];
  var busy = false;
  var advance = false;

  function typing(target) {
    return target.closest("input, textarea, select, [contenteditable]") !== null;
  }

  function panel() {
    var el = document.getElementById("triage-panel");
    return el && el.dataset.ready === "1" ? el : null;
  }

  function digit(event) {
    var match = /^Digit([1-9])$/.exec(event.code || "");
    return match ? match[1] : (/^[1-9]$/.test(event.key) ? event.key : null);
  }

  function go(url) { if (url) { busy = true; window.location.href = url; } }

  /* Perform one key on a ready panel; returns true when the key started a request or navigation. */
  function act(key) {
    var el = panel();
    if (key.name === "j") { go(el.dataset.next); return true; }
    if (key.name === "k") { go(el.dataset.prev); return true; }
    if (!el.dataset.canEdit) { return false; }
    if (key.name === "r") {
      var status = document.getElementById("triage-status");
      if (status && status.form.querySelector('input[name="status"]').value === "reviewed") {
        busy = true; status.click(); return true;
      }
      return false;
    }
    if (key.name === "y" || key.name === "n") {
      var answer = el.querySelector('.rubric-verdict[data-current] button[value="' + (key.name === "y" ? "yes" : "no") + '"]');
      if (!answer) { return false; }
      busy = true; answer.click(); return true;
    }
    if (key.digit) {
      var button = el.querySelector('button.label-toggle[data-shortcut="' + key.digit + '"]');
      if (!button) { return false; }
      if (key.shift) {
        if (button.getAttribute("aria-pressed") === "true") { go(el.dataset.next); return true; }
        advance = true;
      }
      busy = true; button.click(); return true;
    }
    return false;
  }

  function drain() {
    while (pending.length && panel() && !busy) { act(pending.shift()); }
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) { return; }
    if (!document.getElementById("triage-panel")) { return; }
    var name = event.key;
    var key = {name: name === "J" ? "j" : (name === "K" ? "k" : name), digit: digit(event), shift: event.shiftKey};
    if (!(key.name === "j" || key.name === "k" || key.name === "r" || key.name === "y" || key.name === "n" || key.digit)) { return; }
    event.preventDefault();
    pending.push(key);
    drain();
  });

  /* htmx:load fires on the new panel once it is in the page (an outerHTML swap's old target is gone). */
  document.addEventListener("htmx:load", function (event) {
    if (!event.detail.elt || event.detail.elt.id !== "triage-panel") { return; }
    busy = false;
    if (advance) {
      advance = false;
      var el = panel();
      if (el && el.dataset.next) { go(el.dataset.next); return; }
    }
    drain();
  });
  document.addEventListener("htmx:responseError", function () { busy = false; advance = false; drain(); });

  document.addEventListener("change", function (event) {
    if (!event.target.matches("[data-tick-all]")) { return; }
    var table = event.target.closest("table");
    var name = event.target.dataset.tickAll || "a";
    table.querySelectorAll('input[name="' + name + '"]').forEach(function (box) { box.checked = event.target.checked; });
  });
})();
