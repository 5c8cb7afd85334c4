// htmx settings the Content-Security-Policy needs, and what the pages once did with inline
// handlers. Loaded right after htmx, before the page is ready (htmx applies its settings then).
(function () {
  "use strict";
  // app.css styles the request indicators; the <style> htmx would add is refused by the CSP.
  htmx.config.includeIndicatorStyles = false;
  // The CSP forbids eval anyway: say so, rather than have hx-on fail in the console.
  htmx.config.allowEval = false;

  // A form marked data-reset-on-success empties itself once its request succeeded; a
  // success also clears the error an earlier try left in the form.
  document.addEventListener("htmx:afterRequest", function (event) {
    var form = event.detail.elt;
    if (!event.detail.successful || !form.closest) {
      return;
    }
    if (form.hasAttribute("data-reset-on-success")) {
      form.reset();
    }
    var old = form.closest("form") && form.closest("form").querySelector(".request-error");
    if (old) {
      old.remove();
    }
  });

  // A refused request (413 too large, 403, 500: the pages swap only 2xx and 422, their
  // own forms with errors) says why in the form that sent it, instead of nothing happening.
  document.addEventListener("htmx:responseError", function (event) {
    var form = event.detail.elt.closest && event.detail.elt.closest("form");
    if (!form) {
      return;
    }
    var box = form.querySelector(".request-error");
    if (!box) {
      box = document.createElement("p");
      box.className = "form-error request-error";
      box.setAttribute("role", "alert");
      form.appendChild(box);
    }
    box.textContent = errorText(event.detail.xhr);
  });

  // Logging out forgets the labeling page's drafts (static/js/labeling.js, draftKey): the
  // ratings and time of a task not yet sent stay nowhere for the next user of this browser.
  document.addEventListener("submit", function (event) {
    if (!event.target.matches || !event.target.matches("form.logout")) {
      return;
    }
    try {
      Object.keys(localStorage).forEach(function (key) {
        if (key.indexOf("steplabel:task:") === 0) {
          localStorage.removeItem(key);
        }
      });
    } catch (ignored) {
      // Storage disabled: nothing was kept either.
    }
  });

  function errorText(xhr) {
    if (xhr.status === 503) {
      // The database is restarting or failing over (app/main.py): the request changed nothing.
      var wait = parseInt(xhr.getResponseHeader("Retry-After") || "", 10);
      return "The database is briefly away: nothing was changed. Try again" +
        (isNaN(wait) ? "" : " in " + wait + " s") + ".";
    }
    var type = xhr.getResponseHeader("Content-Type") || "";
    var text = xhr.responseText || "";
    if (type.indexOf("application/json") === 0) {
      try {
        var detail = JSON.parse(text).detail;
        if (typeof detail === "string") {
          return detail;
        }
        if (Array.isArray(detail) && detail.length && detail[0].msg) {
          return detail[0].msg;
        }
      } catch (ignored) {
        // Not the JSON it says it is: the generic message below.
      }
    }
    if (type.indexOf("text/plain") === 0 && text) {
      return text;
    }
    return "The server refused this (" + xhr.status + " " + xhr.statusText + "): nothing was changed.";
  }
})();
