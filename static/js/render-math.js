// Typeset LaTeX with KaTeX's auto-render, on load and in every fragment htmx swaps in.
(function () {
  "use strict";

  var options = {
    delimiters: [
      { left: "$$", right: "$$", display: true },
      { left: "\\[", right: "\\]", display: true },
      { left: "\\(", right: "\\)", display: false },
      { left: "$", right: "$", display: false },
      // Bare environments, as MATH solutions write them.
      { left: "\\begin{align*}", right: "\\end{align*}", display: true },
      { left: "\\begin{align}", right: "\\end{align}", display: true },
      { left: "\\begin{aligned}", right: "\\end{aligned}", display: true },
      { left: "\\begin{equation*}", right: "\\end{equation*}", display: true },
      { left: "\\begin{equation}", right: "\\end{equation}", display: true },
      { left: "\\begin{gather*}", right: "\\end{gather*}", display: true },
      { left: "\\begin{eqnarray*}", right: "\\end{eqnarray*}", display: true },
    ],
    // A malformed formula shows as red source text instead of stopping the rest.
    throwOnError: false,
  };

  function renderMath(element) {
    if (typeof window.renderMathInElement === "function") {
      window.renderMathInElement(element, options);
    }
  }

  window.steplabelRenderMath = renderMath;

  document.addEventListener("DOMContentLoaded", function () {
    renderMath(document.body);
  });
  // htmx fires afterSwap on each element it swapped in.
  document.addEventListener("htmx:afterSwap", function (event) {
    renderMath(event.target);
  });
})();
