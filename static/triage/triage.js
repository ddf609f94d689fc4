/* Triage keys in the drilldown and tick-all in the queue.
   j/k walk the queue the user came from; 1–9 toggle a label; Shift+1–9 label and go to the next
   attempt; r marks reviewed; y/n answer the highlighted rubric. No key press is lost:
   - keys pressed while the panel loads or saves are queued and replayed in order once it is ready;
   - the panel counts as ready only after htmx has wired its forms (htmx:load), never from the
     server's HTML: a click on a form htmx has not processed yet is a plain form POST, which raced
     the next key's POST and navigated away with the rest of the queue;
   - keys pressed after j/k/Shift+digit started a navigation are handed to the next page through
     sessionStorage (this script is not deferred, so it listens before the page has finished parsing). */
(function () {
  "use strict";

  var CARRY = "triage-pending-keys";
  var pending = [];
  var busy = false;
  var advance = false;
  var navigatingTo = null;

  try {
    var carried = JSON.parse(window.sessionStorage.getItem(CARRY) || "null");
    window.sessionStorage.removeItem(CARRY);
    if (carried && carried.path === window.location.pathname) { pending = carried.keys || []; }
  } catch (error) { pending = []; }

  function typing(target) {
    return target.closest && target.closest("input, textarea, select, [contenteditable]") !== null;
  }

  function panel() {
    var el = document.getElementById("triage-panel");
    return el && el.dataset.ready === "1" ? el : null;
  }

  function digit(event) {
    var match = /^Digit([1-9])$/.exec(event.code || "");
    return match ? match[1] : (/^[1-9]$/.test(event.key) ? event.key : null);
  }

  function carry() {
    if (!navigatingTo) { return; }
    try {
      var path = new URL(navigatingTo, window.location.href).pathname;
      window.sessionStorage.setItem(CARRY, JSON.stringify({path: path, keys: pending}));
    } catch (error) { /* private mode: keys after a navigation are then lost, as without this */ }
  }

  function go(url) {
    if (!url) { return false; }
    busy = true;
    navigatingTo = url;
    carry();
    window.location.href = url;
    return true;
  }

  /* Perform one key on a ready panel. */
  function act(key) {
    var el = panel();
    if (key.name === "j") { go(el.dataset.next); return; }
    if (key.name === "k") { go(el.dataset.prev); return; }
    if (!el.dataset.canEdit) { return; }
    if (key.name === "r") {
      var status = document.getElementById("triage-status");
      if (status && status.form.querySelector('input[name="status"]').value === "reviewed") {
        busy = true; status.click();
      }
      return;
    }
    if (key.name === "y" || key.name === "n") {
      var answer = el.querySelector('.rubric-verdict[data-current] button[value="' + (key.name === "y" ? "yes" : "no") + '"]');
      if (answer) { busy = true; answer.click(); }
      return;
    }
    if (key.digit) {
      var button = el.querySelector('button.label-toggle[data-shortcut="' + key.digit + '"]');
      if (!button) { return; }
      if (key.shift && button.getAttribute("aria-pressed") === "true") { go(el.dataset.next); return; }
      advance = key.shift;
      busy = true; button.click();
    }
  }

  function drain() {
    while (pending.length && !busy && panel()) { act(pending.shift()); }
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) { return; }
    if (document.readyState !== "loading" && !document.getElementById("triage-panel")) { return; }
    var name = event.key;
    var key = {name: name === "J" ? "j" : (name === "K" ? "k" : name), digit: digit(event), shift: event.shiftKey};
    if (!(key.name === "j" || key.name === "k" || key.name === "r" || key.name === "y" || key.name === "n" || key.digit)) { return; }
    event.preventDefault();
    pending.push(key);
    if (navigatingTo) { carry(); return; }
    drain();
  });

  /* The queue's lists (one row per attempt, or per cluster) get j / k from static/core/list_keys.js. */

  /* htmx:load fires on the new panel after htmx processed it (its forms now post by htmx). */
  document.addEventListener("htmx:load", function (event) {
    var el = event.detail.elt;
    if (!el || el.id !== "triage-panel" || el.tagName !== "SECTION") { return; }
    el.dataset.ready = "1";
    busy = false;
    if (advance) {
      advance = false;
      if (go(el.dataset.next)) { return; }
    }
    drain();
  });
  function failed() { busy = false; advance = false; drain(); }
  document.addEventListener("htmx:responseError", failed);
  document.addEventListener("htmx:sendError", failed);

  document.addEventListener("change", function (event) {
    if (!event.target.matches("[data-tick-all]")) { return; }
    var table = event.target.closest("table");
    var name = event.target.dataset.tickAll || "a";
    table.querySelectorAll('input[name="' + name + '"]').forEach(function (box) { box.checked = event.target.checked; });
  });
})();
