// cooplab view: sort a table by clicking a column header, filter its rows with the search box
// before it, open the option picked in a drop-down. No data is ever turned into markup here: rows are moved or hidden, never rebuilt.
"use strict";
(function () {
  function cellKey(td) {
    if (!td) return { n: null, t: "" };
    var s = td.getAttribute("data-sort");
    var n = s === null || s === "" ? null : Number(s);
    return { n: n !== null && isFinite(n) ? n : null, t: (td.textContent || "").trim().toLowerCase() };
  }
  function sortBy(table, col, th) {
    var body = table.tBodies[0];
    if (!body) return;
    var desc = th.classList.contains("asc");
    Array.prototype.forEach.call(th.parentNode.children, function (h) { h.classList.remove("asc", "desc"); });
    th.classList.add(desc ? "desc" : "asc");
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellKey(a.cells[col]), y = cellKey(b.cells[col]), r;
      if (x.n !== null && y.n !== null) r = x.n - y.n;
      else if (x.n !== null) r = -1;
      else if (y.n !== null) r = 1;
      else r = x.t < y.t ? -1 : x.t > y.t ? 1 : 0;
      return desc ? -r : r;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  function filterRows(table, text) {
    var words = text.toLowerCase().split(/\s+/).filter(Boolean);
    Array.prototype.forEach.call(table.tBodies[0] ? table.tBodies[0].rows : [], function (row) {
      var t = (row.textContent || "").toLowerCase();
      var ok = words.every(function (w) { return t.indexOf(w) >= 0; });
      row.classList.toggle("hidden", !ok);
    });
  }
  function nextTable(el) {
    var n = el.nextElementSibling;
    while (n && n.tagName !== "TABLE") n = n.nextElementSibling;
    return n || (el.closest("form, .tablewrap") || document).querySelector("table");
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("table.sortable thead th").forEach(function (th) {
      var go = function () { sortBy(th.closest("table"), th.cellIndex, th); };
      th.addEventListener("click", go);
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") go(); });
    });
    // ?sort=N on the list: sort by column N at load (-N: descending)
    document.querySelectorAll("table[data-initial-sort]").forEach(function (table) {
      var n = parseInt(table.getAttribute("data-initial-sort"), 10);
      var th = table.tHead && table.tHead.rows[0] ? table.tHead.rows[0].cells[Math.abs(n)] : null;
      if (!th || isNaN(n)) return;
      sortBy(table, th.cellIndex, th);
      if (n < 0 || Object.is(n, -0)) sortBy(table, th.cellIndex, th);
    });
    // a drop-down that picks what the page shows (one society of a batch): open it on change
    document.querySelectorAll("select.autosubmit").forEach(function (sel) {
      sel.addEventListener("change", function () { if (sel.form) sel.form.submit(); });
    });
    document.querySelectorAll("input.filter").forEach(function (input) {
      var table = input.id === "runfilter" ? document.getElementById("runs") : nextTable(input);
      if (!table) return;
      input.addEventListener("input", function () { filterRows(table, input.value); });
      if (input.value) filterRows(table, input.value);
    });
  });
})();
