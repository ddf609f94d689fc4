/* Keyboard reach on list pages (issue 30, item 7).
   - "Skip to the table" (a.skip-link[data-rows]) moves focus straight to the first row's link.
   - j / k move focus to the next / previous row's link of the page's list ([data-row-keys]);
     Enter opens it. Not while typing, not with modifier keys, and not on the triage panel, whose
     own j / k walk the queue (static/triage/triage.js). */
(function () {
  "use strict";

  function typing(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }

  /* Each row's link: the one marked as the row's, else its first link. Rows without a link are skipped. */
  function rowLinks(scope) {
    var tables = scope.matches && scope.matches("[data-row-keys]") ? [scope] : scope.querySelectorAll("[data-row-keys]");
    var links = [];
    Array.prototype.forEach.call(tables, function (table) {
      Array.prototype.forEach.call(table.querySelectorAll("tbody tr"), function (row) {
        var link = row.querySelector("a.row-link, a.open-attempt, a.open-cluster") || row.querySelector("a[href]");
        if (link) { links.push(link); }
      });
    });
    return links;
  }

  function focusRow(link) {
    link.focus();
    link.closest("tr").scrollIntoView({block: "nearest"});
  }

  document.addEventListener("click", function (event) {
    var skip = event.target.closest && event.target.closest("a.skip-link[data-rows]");
    if (!skip) { return; }
    var target = document.querySelector(skip.getAttribute("href"));
    var first = target && rowLinks(target)[0];
    if (!first) { return; }  // no row: the anchor still brings the table into view
    event.preventDefault();
    focusRow(first);
  });

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) { return; }
    if (document.getElementById("triage-panel")) { return; }
    var name = event.key === "J" ? "j" : (event.key === "K" ? "k" : event.key);
    if (name !== "j" && name !== "k") { return; }
    var links = rowLinks(document);
    if (!links.length) { return; }
    event.preventDefault();
    var at = links.indexOf(document.activeElement);
    var next = at < 0 ? 0 : Math.max(0, Math.min(links.length - 1, at + (name === "j" ? 1 : -1)));
    focusRow(links[next]);
  });
})();
