// htmx settings the Content-Security-Policy needs, and what the pages once did with inline
// handlers. Loaded right after htmx, before the page is ready (htmx applies its settings then).
(function () {
  "use strict";
  // app.css styles the request indicators; the <style> htmx would add is refused by the CSP.
  htmx.config.includeIndicatorStyles = false;
  // The CSP forbids eval anyway: say so, rather than have hx-on fail in the console.
  htmx.config.allowEval = false;

  // A form marked data-reset-on-success empties itself once its request succeeded.
  document.addEventListener("htmx:afterRequest", function (event) {
    var form = event.detail.elt;
    if (event.detail.successful && form.hasAttribute("data-reset-on-success")) {
      form.reset();
    }
  });
})();
