// Admin tables on a phone: app.css stacks each row as a card below 40rem, and each cell
// names its column (data-label, shown before it), so no column sits past the window's edge.
// Without this script, and for a table marked data-no-cards, the table scrolls in its box.
(function () {
  "use strict";

  // The header of each column: the bottom header row's cells, spread over their colspans,
  // after the name of a group header above that spans several columns.
  function columnNames(table) {
    var rows = table.tHead ? Array.prototype.slice.call(table.tHead.rows) : [];
    var names = [];
    rows.forEach(function (row, depth) {
      var column = 0;
      Array.prototype.forEach.call(row.cells, function (cell) {
        var text = cell.textContent.replace(/\s+/g, " ").trim();
        for (var k = 0; k < cell.colSpan; k += 1) {
          var above = names[column + k];
          var grouped = depth > 0 && above && above !== text && above.group;
          names[column + k] = { text: grouped ? above.text + ": " + text : text };
          names[column + k].group = cell.colSpan > 1;
        }
        column += cell.colSpan;
      });
    });
    return names.map(function (name) { return name.text; });
  }

  // A table whose parts are shown as blocks loses its table semantics in browsers: screen
  // readers (and role queries) would no longer find its rows and row headers. Say them.
  function keepTableRoles(table) {
    table.setAttribute("role", "table");
    Array.prototype.forEach.call(table.querySelectorAll(":scope > thead, :scope > tbody"),
      function (group) { group.setAttribute("role", "rowgroup"); });
    Array.prototype.forEach.call(table.rows, function (row) {
      row.setAttribute("role", "row");
      Array.prototype.forEach.call(row.cells, function (cell) {
        var header = cell.tagName === "TH";
        var inHead = row.parentNode && row.parentNode.tagName === "THEAD";
        cell.setAttribute("role", !header ? "cell" : inHead ? "columnheader" : "rowheader");
      });
    });
  }

  function label(root) {
    // A matrix (labelers by steps, labelers by labelers) reads across both ways: it scrolls.
    root.querySelectorAll("main table:not([data-no-cards])").forEach(function (table) {
      var names = columnNames(table);
      if (!names.length) return;
      table.classList.add("cards");
      keepTableRoles(table);
      Array.prototype.forEach.call(table.tBodies, function (body) {
        Array.prototype.forEach.call(body.rows, function (row) {
          var column = 0;
          Array.prototype.forEach.call(row.cells, function (cell) {
            if (names[column] && cell.colSpan === 1) cell.setAttribute("data-label", names[column]);
            column += cell.colSpan;
          });
        });
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () { label(document); });
  // The live blocks and pagers swap new tables in.
  document.addEventListener("htmx:afterSettle", function () { label(document); });
})();
