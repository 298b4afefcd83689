// Sort (click a column header) and filter (text, kind) the index table. Vanilla JS, no network;
// the table is complete without it.
(function () {
  "use strict";
  function setup() {
    var table = document.getElementById("runs");
    if (!table) { return; }
    var tbody = table.tBodies[0];
    var rows = Array.prototype.slice.call(tbody.rows);
    var text = document.getElementById("filter-text");
    var kind = document.getElementById("filter-kind");
    var count = document.getElementById("filter-count");
    document.getElementById("filters").hidden = false;

    function applyFilter() {
      var needle = text.value.trim().toLowerCase();
      var shown = 0;
      rows.forEach(function (row) {
        var ok = (!kind.value || row.dataset.kind === kind.value) &&
                 (!needle || row.textContent.toLowerCase().indexOf(needle) !== -1);
        row.hidden = !ok;
        if (ok) { shown += 1; }
      });
      count.textContent = shown + " of " + rows.length + " shown";
    }

    var sortKey = "started", descending = true;
    function applySort() {
      rows.sort(function (a, b) {
        var x = a.dataset[sortKey] || "", y = b.dataset[sortKey] || "";
        var cmp = x < y ? -1 : x > y ? 1 : 0;
        return descending ? -cmp : cmp;
      });
      rows.forEach(function (row) { tbody.appendChild(row); });
      table.querySelectorAll("th[data-key]").forEach(function (th) {
        th.setAttribute("aria-sort", th.dataset.key === sortKey ? (descending ? "descending" : "ascending") : "none");
      });
    }

    table.querySelectorAll("th[data-key] button").forEach(function (button) {
      button.addEventListener("click", function () {
        var key = button.parentElement.dataset.key;
        descending = key === sortKey ? !descending : key === "started";
        sortKey = key;
        applySort();
      });
    });
    text.addEventListener("input", applyFilter);
    kind.addEventListener("change", applyFilter);
    applySort();
    applyFilter();
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setup);
  } else {
    setup();
  }
})();
