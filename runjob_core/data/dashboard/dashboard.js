// runjob dashboard: sortable tables and the job filter. No network, no library.
// Cells may carry data-sort (the value to sort by); headers data-type="num" sort numerically.
(function () {
  "use strict";

  function cellValue(row, index, numeric) {
    var cell = row.cells[index];
    if (!cell) { return numeric ? -Infinity : ""; }
    var raw = cell.hasAttribute("data-sort") ? cell.getAttribute("data-sort") : cell.textContent;
    if (!numeric) { return raw.toLowerCase(); }
    var value = parseFloat(raw);
    return isNaN(value) ? -Infinity : value;
  }

  function makeSortable(table) {
    var headers = table.tHead ? table.tHead.rows[0].cells : [];
    Array.prototype.forEach.call(headers, function (th, index) {
      th.tabIndex = 0;
      th.title = "sort by " + th.textContent;
      function sort() {
        var numeric = th.getAttribute("data-type") === "num";
        var ascending = th.getAttribute("aria-sort") !== "ascending";
        Array.prototype.forEach.call(headers, function (other) { other.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = cellValue(a, index, numeric), y = cellValue(b, index, numeric);
          var order = x < y ? -1 : x > y ? 1 : 0;
          return ascending ? order : -order;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      }
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (event) { if (event.key === "Enter") { sort(); } });
    });
  }

  function makeFilter(input, table) {
    input.addEventListener("input", function () {
      var needle = input.value.toLowerCase();
      Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
        row.hidden = needle !== "" && row.textContent.toLowerCase().indexOf(needle) === -1;
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), makeSortable);
    var filter = document.getElementById("filter"), jobs = document.getElementById("jobs");
    if (filter && jobs) { makeFilter(filter, jobs); }
  });
}());
