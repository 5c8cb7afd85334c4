// Typeset LaTeX with KaTeX's auto-render, on load and in every fragment htmx swaps in.
(function () {
  "use strict";

  var options = {
    delimiters: [
      { left: "$$", right: "$$", display: true },
      { left: "\\[", right: "\\]", display: true },
      { left: "\\(", right: "\\)", display: false },
      { left: "$", right: "$", display: false },
    ],
    // A malformed formula shows as red source text instead of stopping the rest.
    throwOnError: false,
  };

  function renderMath(element) {
    if (typeof window.renderMathInElement === "function") {
      window.renderMathInElement(element, options);
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    renderMath(document.body);
  });
  // htmx fires afterSwap on each element it swapped in.
  document.addEventListener("htmx:afterSwap", function (event) {
    renderMath(event.target);
  });
})();
