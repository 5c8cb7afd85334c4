// The labeling page: reveal steps one at a time, rate them with keys or buttons, submit.
//
// Ratings live here until submit, and in localStorage so a reload or a crash loses
// nothing. Submitting is idempotent on the server, so a retry is always safe.
(function () {
  "use strict";

  var HEARTBEAT_MS = 5 * 60 * 1000;
  var task = null; // the state of the task on the page

  function csrfToken() {
    return document.querySelector('meta[name="csrf-token"]').content;
  }

  function init(section) {
    if (task && task.heartbeat) clearInterval(task.heartbeat);
    task = null;
    if (!section || !section.dataset.taskId) return;
    var steps = Array.prototype.slice.call(section.querySelectorAll("li.step"));
    task = {
      section: section,
      id: section.dataset.taskId,
      steps: steps,
      ratings: steps.map(function () { return null; }),
      flags: steps.map(function () { return false; }),
      alternatives: steps.map(function (step) {
        return Array.prototype.map.call(step.querySelectorAll("li.alternative"), function () {
          return null;
        });
      }),
      history: [],
      elapsed: 0,
      visibleSince: document.hidden ? null : Date.now(),
      sending: false,
    };
    restoreDraft();
    wireButtons();
    task.heartbeat = setInterval(heartbeat, HEARTBEAT_MS);
    if (window.steplabelRenderMath) window.steplabelRenderMath(section);
    render();
  }

  // The first step not yet rated, or the step rated negative; steps.length when done.
  function frontier() {
    for (var i = 0; i < task.ratings.length; i++) {
      if (task.ratings[i] === null || task.ratings[i] === -1) return i;
    }
    return task.ratings.length;
  }

  // Where keys 1/2/3 apply: {step} or {step, alternative}; null once the task is complete.
  function target() {
    var k = frontier();
    if (k === task.ratings.length) return null;
    if (task.ratings[k] === null) return { step: k };
    var open = task.alternatives[k].indexOf(null);
    return open === -1 ? null : { step: k, alternative: open };
  }

  function finishReason() {
    var k = frontier();
    if (k === task.ratings.length) return "solution";
    if (task.ratings[k] === -1 && task.alternatives[k].indexOf(null) === -1) return "found_error";
    return null;
  }

  function rate(step, alternative, value) {
    if (task.sending || step > frontier()) return;
    var list = alternative === undefined ? task.ratings : task.alternatives[step];
    var index = alternative === undefined ? step : alternative;
    task.history.push({ step: step, alternative: alternative, before: list[index] });
    list[index] = value;
    changed();
  }

  function undo() {
    var last = task.history.pop();
    if (!last) return;
    if (last.alternative === undefined) task.ratings[last.step] = last.before;
    else task.alternatives[last.step][last.alternative] = last.before;
    changed();
  }

  function toggleFlag(step) {
    task.flags[step] = !task.flags[step];
    changed();
  }

  function flagTarget() {
    var k = frontier();
    return Math.min(k, task.steps.length - 1);
  }

  function changed() {
    saveDraft();
    render();
  }

  function render() {
    var k = frontier();
    var current = target();
    task.steps.forEach(function (step, i) {
      step.hidden = i > k;
      step.classList.toggle("current", !!current && current.step === i && current.alternative === undefined);
      markPressed(step.querySelector(".step-controls"), task.ratings[i]);
      var flag = step.querySelector('[data-action="flag"]');
      flag.setAttribute("aria-pressed", String(task.flags[i]));
      var box = step.querySelector(".alternatives");
      if (box) {
        box.hidden = task.ratings[i] !== -1;
        box.querySelectorAll("li.alternative").forEach(function (item, j) {
          markPressed(item, task.alternatives[i][j]);
          item.classList.toggle("current", !!current && current.step === i && current.alternative === j);
        });
      }
    });
    var reason = finishReason();
    task.section.querySelector('[data-action="submit"]').disabled = !reason || task.sending;
    if (!task.sending) setStatus(describe(k, current, reason));
    var focus = task.section.querySelector("li.current");
    if (focus) focus.scrollIntoView({ block: "nearest" });
  }

  function describe(k, current, reason) {
    if (reason === "solution") return "All steps rated. Press Enter to submit.";
    if (reason === "found_error") return "Error found at step " + (k + 1) + ". Press Enter to submit.";
    if (current && current.alternative !== undefined) {
      return "Rate alternative " + (current.alternative + 1) + " of step " + (k + 1) + ".";
    }
    return "Rate step " + (k + 1) + " of " + task.steps.length + ".";
  }

  function markPressed(container, rating) {
    container.querySelectorAll(":scope > .rating [data-rating], :scope > [data-rating]").forEach(function (button) {
      button.setAttribute("aria-pressed", String(rating !== null && Number(button.dataset.rating) === rating));
    });
  }

  function setStatus(text, isError) {
    var status = task.section.querySelector(".status");
    status.textContent = text;
    status.classList.toggle("error", !!isError);
  }

  function wireButtons() {
    task.steps.forEach(function (step, i) {
      step.querySelectorAll(".step-controls [data-rating]").forEach(function (button) {
        button.addEventListener("click", function () { rate(i, undefined, Number(button.dataset.rating)); });
      });
      step.querySelector('[data-action="flag"]').addEventListener("click", function () { toggleFlag(i); });
      step.querySelectorAll("li.alternative").forEach(function (item, j) {
        item.querySelectorAll("[data-rating]").forEach(function (button) {
          button.addEventListener("click", function () { rate(i, j, Number(button.dataset.rating)); });
        });
      });
    });
    var actions = task.section.querySelector(".task-footer");
    actions.querySelector('[data-action="submit"]').addEventListener("click", submitComplete);
    actions.querySelector('[data-action="bad_problem"]').addEventListener("click", function () { askReason("bad_problem"); });
    actions.querySelector('[data-action="give_up"]').addEventListener("click", function () { askReason("give_up"); });
    actions.querySelector('[data-action="help"]').addEventListener("click", showKeys);
  }

  function showKeys() {
    task.section.querySelector(".keys-dialog").showModal();
  }

  function askReason(reason) {
    var dialog = task.section.querySelector(".reason-dialog");
    dialog.querySelector(".reason-title").textContent =
      reason === "bad_problem" ? "What is wrong with the problem?" : "Why are you giving up?";
    dialog.returnValue = "";
    dialog.onclose = function () {
      var note = dialog.querySelector("textarea").value.trim();
      if (dialog.returnValue === "confirm" && note) submit(reason, note);
    };
    dialog.showModal();
  }

  function submitComplete() {
    var reason = finishReason();
    if (reason) submit(reason, "");
  }

  function payload(reason, note) {
    var k = frontier();
    // Give up and bad problem keep the ratings given before the current step.
    var count = reason === "found_error" ? k + 1 : reason === "solution" ? task.steps.length : k;
    var steps = [];
    for (var i = 0; i < count; i++) {
      steps.push({
        rating: task.ratings[i],
        flagged: task.flags[i],
        alternative_ratings: reason === "found_error" && i === k ? task.alternatives[i] : [],
      });
    }
    return { steps: steps, finish_reason: reason, total_time: elapsedMs(), note: note };
  }

  function submit(reason, note) {
    if (task.sending) return;
    var section = task.section;
    task.sending = true;
    setStatus("Saving…");
    render();
    fetch(section.dataset.submitUrl, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrfToken() },
      body: JSON.stringify(payload(reason, note)),
    })
      .then(function (response) {
        if (response.status === 401) {
          window.location.href = "/login?next=/label/next";
          return null;
        }
        return response.json().then(function (data) { return { ok: response.ok, data: data }; });
      })
      .then(function (result) {
        if (!result) return;
        if (!result.ok) throw new Error(detail(result.data));
        localStorage.removeItem(draftKey());
        loadNext(result.data.created ? "Saved." : "Already submitted: the first submission was kept.");
      })
      .catch(function (error) {
        if (task && task.section === section) {
          task.sending = false;
          render();
          var text = error instanceof TypeError
            ? "Could not reach the server. Your ratings are kept: press Enter to try again."
            : error.message;
          setStatus(text, true);
        }
      });
  }

  function detail(data) {
    if (data && Array.isArray(data.detail)) {
      return data.detail.map(function (d) { return d.msg; }).join("; ");
    }
    return (data && data.detail) || "The server refused the label.";
  }

  function loadNext(message) {
    htmx.ajax("GET", "/label/next", { target: "#task", swap: "outerHTML" }).then(function () {
      init(document.getElementById("task"));
      var flash = document.querySelector(".flash");
      if (flash) flash.textContent = message;
    });
  }

  function heartbeat() {
    if (!task) return;
    var section = task.section;
    fetch(section.dataset.heartbeatUrl, {
      method: "POST",
      credentials: "same-origin",
      headers: { "X-CSRF-Token": csrfToken() },
    }).then(function (response) {
      if (response.status === 409 && task && task.section === section) {
        setStatus("This task is no longer yours. Reload for the next one.", true);
      }
    }).catch(function () { /* offline: the next beat tries again */ });
  }

  // Time on task counts only while the page is visible.
  function elapsedMs() {
    var running = task.visibleSince === null ? 0 : Date.now() - task.visibleSince;
    return Math.round(task.elapsed + running);
  }

  document.addEventListener("visibilitychange", function () {
    if (!task) return;
    if (document.hidden) {
      task.elapsed = elapsedMs();
      task.visibleSince = null;
      saveDraft();
    } else {
      task.visibleSince = Date.now();
    }
  });

  function draftKey() {
    return "steplabel:task:" + task.id;
  }

  function saveDraft() {
    var draft = { ratings: task.ratings, flags: task.flags, alternatives: task.alternatives, elapsed: elapsedMs() };
    try {
      localStorage.setItem(draftKey(), JSON.stringify(draft));
    } catch (e) { /* storage full or disabled: the page still works */ }
  }

  function restoreDraft() {
    var draft;
    try {
      draft = JSON.parse(localStorage.getItem(draftKey()) || "null");
    } catch (e) {
      draft = null;
    }
    if (!draft || !Array.isArray(draft.ratings) || draft.ratings.length !== task.ratings.length) return;
    task.ratings = draft.ratings;
    task.flags = draft.flags;
    task.alternatives = draft.alternatives;
    task.elapsed = draft.elapsed || 0;
  }

  function typing(event) {
    var element = event.target;
    return element && (element.tagName === "TEXTAREA" || element.tagName === "INPUT" || element.isContentEditable);
  }

  document.addEventListener("keydown", function (event) {
    if (!task || typing(event) || event.ctrlKey || event.metaKey || event.altKey) return;
    if (document.querySelector("dialog[open]")) return;
    var values = { "1": -1, "2": 0, "3": 1 };
    var current = target();
    if (event.key in values) {
      if (current) rate(current.step, current.alternative, values[event.key]);
    } else if (event.key === "f") {
      toggleFlag(flagTarget());
    } else if (event.key === "u") {
      undo();
    } else if (event.key === "Enter") {
      if (event.target && event.target.tagName === "BUTTON" && event.target.dataset.rating) event.preventDefault();
      submitComplete();
    } else if (event.key === "?") {
      showKeys();
    } else {
      return;
    }
    event.preventDefault();
  });

  document.addEventListener("DOMContentLoaded", function () {
    init(document.getElementById("task"));
  });
})();
