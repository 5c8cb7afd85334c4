// The labeling page: reveal steps one at a time, rate them with keys or buttons, submit.
//
// Phase-2 tasks: a negative step ends the solution (after rating its alternatives, if any).
// Phase-1 tasks: rate every candidate of a step, continue with the best one (or choose
// another, `c` and its number, or write your own, `w`: when none is right, or none follows
// the steps chosen before), and go on to the next step.
//
// Ratings, and the history that `u` undoes, live here until submit, and in localStorage
// so a reload or a crash loses nothing. Submitting is idempotent on the server, so a retry
// is always safe.
(function () {
  "use strict";

  // The lease is kept by a beat every third of its length (data-lease-minutes, the server's
  // setting: 1 minute and up), so that one beat lost to a network hiccup still leaves time
  // for the next; never more often than the floor, whatever the page says.
  var HEARTBEAT_FLOOR_MS = 20 * 1000;
  var task = null; // the state of the task on the page
  var footerWatch = null; // keeps the page's scroll padding the sticky footer's height

  function csrfToken() {
    return document.querySelector('meta[name="csrf-token"]').content;
  }

  function init(section) {
    if (task && task.heartbeat) clearInterval(task.heartbeat);
    if (task) clearTimeout(task.resend);
    task = null;
    if (footerWatch) footerWatch.disconnect();
    document.documentElement.style.scrollPaddingBottom = "";
    if (!section || !section.dataset.taskId) return;
    var steps = Array.prototype.slice.call(section.querySelectorAll("li.step"));
    var phase1 = section.dataset.style === "phase1";
    task = {
      section: section,
      id: section.dataset.taskId,
      phase1: phase1,
      steps: steps,
      ratings: steps.map(function () { return null; }),
      flags: steps.map(function () { return false; }),
      // Ratings of each step's other candidates (phase 1) or alternatives (phase 2).
      alternatives: steps.map(function (step) {
        var others = phase1
          ? Array.prototype.slice.call(step.querySelectorAll("li.candidate"), 1)
          : step.querySelectorAll("li.alternative");
        return Array.prototype.map.call(others, function () { return null; });
      }),
      chosen: steps.map(function () { return null; }),
      human: steps.map(function () { return null; }),
      // Phase 1: the labeler opened the box to write a step although a candidate is right.
      writing: steps.map(function () { return false; }),
      // Phase 1: the step whose candidate the next number key chooses, after `c`.
      choosing: null,
      history: [],
      elapsed: 0,
      visibleSince: document.hidden ? null : Date.now(),
      sending: false,
    };
    restoreDraft();
    restoreHumanSteps();
    wireButtons();
    task.padForFooter = padForFooter(section.querySelector(".task-footer"));
    task.heartbeat = setInterval(heartbeat, heartbeatMs(section));
    if (window.steplabelRenderMath) window.steplabelRenderMath(section);
    render();
  }

  // The first step not yet rated, or the step rated negative; steps.length when done.
  // Phase 1: the first step the labeler has not continued from.
  function frontier() {
    if (task.phase1) {
      for (var j = 0; j < task.ratings.length; j++) {
        if (task.chosen[j] === null && task.human[j] === null) return j;
      }
      return task.ratings.length;
    }
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
    if (!task.phase1 && task.ratings[k] !== -1) return null;
    var open = task.alternatives[k].indexOf(null);
    return open === -1 ? null : { step: k, alternative: open };
  }

  // Phase 1: the ratings of step i's candidates, the step itself first.
  function candidateRatings(i) {
    return [task.ratings[i]].concat(task.alternatives[i]);
  }

  function allRated(i) {
    return candidateRatings(i).indexOf(null) === -1;
  }

  // Phase 1: the last step whose candidates are all rated (-1 before any): the one `c` and
  // `w` change, unless a button of another step has the focus.
  function lastRatedStep() {
    var k = frontier();
    return k < task.steps.length && allRated(k) ? k : k - 1;
  }

  function choiceStep() {
    var focused = focusedStep();
    return focused !== -1 && allRated(focused) ? focused : lastRatedStep();
  }

  // Phase 1: continue with the best candidate once all are rated, unless one is chosen.
  function settleChoice(i) {
    var ratings = candidateRatings(i);
    if (task.chosen[i] !== null && ratings[task.chosen[i]] === -1) task.chosen[i] = null;
    if (task.chosen[i] !== null || task.human[i] !== null || ratings.indexOf(null) !== -1) return;
    var best = ratings.indexOf(1) !== -1 ? ratings.indexOf(1) : ratings.indexOf(0);
    if (best !== -1) task.chosen[i] = best;
  }

  function choose(step, candidate) {
    var ratings = candidateRatings(step);
    if (!allRated(step) || candidate >= ratings.length) return;
    if (ratings[candidate] === -1) {
      setStatus("Candidate " + (candidate + 1) + " of step " + (step + 1) +
        " is rated negative: continue with another, or write the step.", true);
      return;
    }
    task.history.push({ step: step, choice: true, chosen: task.chosen[step], human: task.human[step] });
    task.chosen[step] = candidate;
    task.human[step] = null;
    task.writing[step] = false;
    // Back to the keys: Enter submits now, instead of pressing the chosen button again.
    if (document.activeElement) document.activeElement.blur();
    changed();
  }

  // `c`: the next number key chooses a candidate of the step just rated.
  function startChoosing() {
    var step = choiceStep();
    if (step === -1) {
      setStatus("Rate the candidates of step 1 first; then c and a number chooses one.");
      return;
    }
    task.choosing = step;
    setStatus("Continue step " + (step + 1) + " with candidate number… press 1 to " +
      candidateRatings(step).length + ", or Esc.");
  }

  // The key after `c`: a candidate's number chooses it, and any other number only says
  // there is no such candidate (true: the key is used up, for 1 to 3 would otherwise rate
  // the next step); any other key lets `c` go and does what it does (false), Esc nothing
  // more.
  function chooseByKey(event) {
    var step = task.choosing;
    task.choosing = null;
    if (!/^[0-9]$/.test(event.key)) {
      render();
      return event.key === "Escape";
    }
    var number = Number(event.key);
    var count = candidateRatings(step).length;
    if (number >= 1 && number <= count) {
      choose(step, number - 1);
    } else {
      setStatus("Step " + (step + 1) + " has " + count + (count === 1 ? " candidate" : " candidates") +
        ", no candidate " + number + ": nothing was rated or chosen. Press c and 1 to " + count +
        " to choose one.", true);
    }
    return true;
  }

  function useHuman(step) {
    var box = task.steps[step].querySelector(".human-step");
    var textarea = box.querySelector("textarea");
    var counter = box.querySelector(".note-count");
    var problem = humanStepProblem(textarea.value, Number(counter.dataset.max));
    if (problem) {
      // Refused where the labeler looks, never cut: the step stays in the box to shorten.
      textarea.setCustomValidity(problem);
      textarea.reportValidity();
      setStatus(problem, true);
      return;
    }
    var text = textarea.value.trim();
    task.history.push({ step: step, choice: true, chosen: task.chosen[step], human: task.human[step] });
    task.human[step] = text;
    task.chosen[step] = null;
    task.writing[step] = false;
    // Back to the keys: the next step's ratings, or Enter to submit.
    if (document.activeElement) document.activeElement.blur();
    changed();
  }

  function writeOwn(step) {
    task.writing[step] = true;
    render();
    task.steps[step].querySelector(".human-step textarea").focus();
  }

  // Esc in the box: back to the keys; the box closes unless the step has nothing else.
  function leaveBox(step) {
    document.activeElement.blur();
    task.writing[step] = false;
    render();
  }

  // A step written before a reload shows in its box again.
  function restoreHumanSteps() {
    task.steps.forEach(function (step, i) {
      var textarea = step.querySelector(".human-step textarea");
      if (textarea && task.human[i] !== null) {
        textarea.value = task.human[i];
        countText(textarea.value, step.querySelector(".human-step .note-count"));
      }
    });
  }

  function finishReason() {
    var k = frontier();
    if (k === task.ratings.length) return "solution";
    if (task.phase1) return null;
    if (task.ratings[k] === -1 && task.alternatives[k].indexOf(null) === -1) return "found_error";
    return null;
  }

  function rate(step, alternative, value) {
    if (task.sending || step > frontier()) return;
    var list = alternative === undefined ? task.ratings : task.alternatives[step];
    var index = alternative === undefined ? step : alternative;
    task.history.push({
      step: step, alternative: alternative, before: list[index],
      chosen: task.chosen[step], human: task.human[step],
    });
    list[index] = value;
    if (task.phase1) settleChoice(step);
    changed();
  }

  function undo() {
    var last = task.history.pop();
    if (!last) return;
    if (!last.choice) {
      if (last.alternative === undefined) task.ratings[last.step] = last.before;
      else task.alternatives[last.step][last.alternative] = last.before;
    }
    task.chosen[last.step] = last.chosen;
    task.human[last.step] = last.human;
    changed();
  }

  function toggleFlag(step) {
    task.flags[step] = !task.flags[step];
    changed();
  }

  // The step whose button (or text box) has the focus, if any.
  function focusedStep() {
    var element = document.activeElement;
    var item = element && element.closest ? element.closest("li.step") : null;
    return item ? task.steps.indexOf(item) : -1;
  }

  // The step the labeler is on: the focused one, else the highlighted one (the last once
  // all are rated).
  function cursorStep() {
    var focused = focusedStep();
    return focused !== -1 ? focused : Math.min(frontier(), task.steps.length - 1);
  }

  // Scrolling a step or a focused button into view leaves it clear of the sticky footer.
  function padForFooter(footer) {
    function pad() {
      document.documentElement.style.scrollPaddingBottom = footer.offsetHeight + 16 + "px";
    }
    pad();
    footerWatch = new ResizeObserver(pad);
    footerWatch.observe(footer);
    return pad;
  }

  function changed() {
    clearFlash();
    saveDraft();
    render();
  }

  // "Saved." (or why not) is about the task before: gone once this one is worked on.
  function clearFlash() {
    var flash = document.querySelector(".flash");
    if (flash && flash.textContent) {
      flash.textContent = "";
      flash.classList.remove("warning");
    }
  }

  function render() {
    var k = frontier();
    var current = target();
    task.steps.forEach(function (step, i) {
      step.hidden = i > k;
      if (task.phase1) {
        renderCandidates(step, i, current);
        return;
      }
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
    if (focus) {
      // Now: the observer would pad for a footer that a longer status just made taller
      // only after this scroll.
      task.padForFooter();
      // The whole step first, with its Unsure button and (phase 1) its "write the step"
      // link below the candidates, then the item being rated, should the step not fit.
      focus.closest("li.step").scrollIntoView({ block: "nearest" });
      focus.scrollIntoView({ block: "nearest" });
    }
  }

  function renderCandidates(step, i, current) {
    var ratings = candidateRatings(i);
    var rated = allRated(i);
    step.querySelectorAll("li.candidate").forEach(function (item, c) {
      markPressed(item.querySelector(".step-controls"), ratings[c]);
      var choice = item.querySelector('[data-action="choose"]');
      if (choice) {
        choice.setAttribute("aria-pressed", String(task.chosen[i] === c));
        choice.disabled = !rated || ratings[c] === -1;
      }
      item.classList.toggle("chosen", task.chosen[i] === c);
      var isTarget = !!current && current.step === i &&
        (c === 0 ? current.alternative === undefined : current.alternative === c - 1);
      item.classList.toggle("current", isTarget);
    });
    step.querySelector('[data-action="flag"]').setAttribute("aria-pressed", String(task.flags[i]));
    var used = task.human[i] !== null;
    // The box opens by itself only where every candidate is wrong; else on request.
    var allWrong = rated && ratings.indexOf(1) === -1 && ratings.indexOf(0) === -1;
    var editing = rated && (task.writing[i] || (allWrong && !used));
    var editor = step.querySelector(".human-edit");
    var opening = editing && editor.hidden;
    editor.hidden = !editing;
    step.querySelector(".human-step").hidden = !editing && !used;
    renderPreview(step.querySelector(".human-preview"), task.human[i], editing);
    step.querySelector(".write-own").hidden = editing || used || i !== lastRatedStep();
    if (opening && allWrong && !used) editor.querySelector("textarea").focus();
  }

  // The labeler's step, typeset and marked as the step in use, as a chosen candidate is.
  function renderPreview(preview, text, editing) {
    preview.hidden = text === null;
    preview.querySelector('[data-action="edit-human"]').hidden = editing;
    if (text === null || preview.dataset.text === text) return;
    var body = preview.querySelector(".step-text");
    body.textContent = text;
    preview.dataset.text = text;
    if (window.steplabelRenderMath) window.steplabelRenderMath(body);
  }

  function describe(k, current, reason) {
    if (reason === "solution") return "All steps rated. Press Enter to submit.";
    if (reason === "found_error") return "Error found at step " + (k + 1) + ". Press Enter to submit.";
    if (task.phase1 && !current && k < task.steps.length) {
      return "Every candidate of step " + (k + 1) + " is negative: write the step yourself.";
    }
    if (task.phase1 && current) {
      return "Rate candidate " + ((current.alternative === undefined ? 0 : current.alternative + 1) + 1) +
        " of step " + (k + 1) + ".";
    }
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

  function wireCandidates(step, i) {
    step.querySelectorAll("li.candidate").forEach(function (item, c) {
      var alternative = c === 0 ? undefined : c - 1;
      item.querySelectorAll("[data-rating]").forEach(function (button) {
        button.addEventListener("click", function () { rate(i, alternative, Number(button.dataset.rating)); });
      });
      var choice = item.querySelector('[data-action="choose"]');
      if (choice) choice.addEventListener("click", function () { choose(i, c); });
    });
    step.querySelector('[data-action="flag"]').addEventListener("click", function () { toggleFlag(i); });
    step.querySelector('[data-action="use-human"]').addEventListener("click", function () { useHuman(i); });
    step.querySelector('[data-action="write-own"]').addEventListener("click", function () { writeOwn(i); });
    step.querySelector('[data-action="edit-human"]').addEventListener("click", function () { writeOwn(i); });
    var textarea = step.querySelector(".human-step textarea");
    var counter = step.querySelector(".human-step .note-count");
    textarea.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        useHuman(i);
      } else if (event.key === "Escape") {
        event.preventDefault();
        leaveBox(i);
      }
    });
    textarea.addEventListener("input", function () {
      textarea.setCustomValidity("");
      countText(textarea.value, counter);
    });
  }

  function wireButtons() {
    task.steps.forEach(function (step, i) {
      if (task.phase1) {
        wireCandidates(step, i);
        return;
      }
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
    task.section.addEventListener("click", letGoOfMouseFocus);
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
    var form = dialog.querySelector("form");
    var textarea = dialog.querySelector("textarea");
    var counter = dialog.querySelector(".note-count");
    var send = form.querySelector('[value="confirm"]');
    dialog.returnValue = "";
    // `required` accepts spaces, and the server refuses a note over the limit: say so here,
    // and keep the dialog open, rather than send what would be refused.
    form.onsubmit = function (event) {
      if (!event.submitter || event.submitter.value !== "confirm") return;
      var problem = noteProblem(textarea.value, Number(counter.dataset.max));
      if (problem) {
        event.preventDefault();
        textarea.setCustomValidity(problem);
        textarea.reportValidity();
      }
    };
    textarea.oninput = function () {
      textarea.setCustomValidity("");
      countText(textarea.value, counter);
    };
    textarea.onkeydown = function (event) {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        form.requestSubmit(send);
      }
    };
    countText(textarea.value, counter);
    dialog.onclose = function () {
      var note = textarea.value.trim();
      if (dialog.returnValue === "confirm" && note) submit(reason, note);
    };
    dialog.showModal();
  }

  // A text's length as the server counts it: characters (not UTF-16 units), spaces around
  // it left out.
  function textLength(text) {
    return Array.from(text.trim()).length;
  }

  // What is wrong with a text to send, as the server would say it; "" when nothing is.
  function lengthProblem(text, max, what, empty, verb) {
    var length = textLength(text);
    if (!length) return empty;
    if (length > max) {
      return what + " has " + length.toLocaleString("en") + " characters, more than the " +
        max.toLocaleString("en") + " allowed: shorten it to " + verb + " it.";
    }
    return "";
  }

  function noteProblem(note, max) {
    return lengthProblem(note, max, "The note", "Say why, in a few words.", "send");
  }

  function humanStepProblem(text, max) {
    return lengthProblem(text, max, "Your step", "Write the step first.", "use");
  }

  function countText(text, counter) {
    var max = Number(counter.dataset.max);
    var length = textLength(text);
    var text = length.toLocaleString("en") + " / " + max.toLocaleString("en") + " characters";
    if (length > max) text += ": " + (length - max).toLocaleString("en") + " too many";
    counter.textContent = text;
    counter.classList.toggle("over", length > max);
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
      if (task.phase1) {
        steps.push({
          rating: task.ratings[i],
          flagged: task.flags[i],
          alternative_ratings: task.alternatives[i],
          chosen: task.chosen[i],
          human_text: task.human[i],
        });
        continue;
      }
      steps.push({
        rating: task.ratings[i],
        flagged: task.flags[i],
        alternative_ratings: reason === "found_error" && i === k ? task.alternatives[i] : [],
      });
    }
    return { steps: steps, finish_reason: reason, total_time: elapsedMs(), note: note };
  }

  var AWAY_RETRY_S = 3; // when a 503 names no Retry-After

  // Seconds a 503 asks to wait (Retry-After), within reason.
  function retryAfter(response) {
    var seconds = parseInt(response.headers.get("Retry-After") || "", 10);
    return isNaN(seconds) ? AWAY_RETRY_S : Math.min(Math.max(seconds, 1), 60);
  }

  // ``body``: a resend after a 503 sends what the labeler submitted, whatever they did since.
  function submit(reason, note, body) {
    if (task.sending) return;
    var section = task.section;
    clearTimeout(task.resend);
    task.sending = true;
    setStatus("Saving…");
    render();
    body = body || JSON.stringify(payload(reason, note));
    fetch(section.dataset.submitUrl, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrfToken() },
      body: body,
    })
      .then(function (response) {
        if (response.status === 401) {
          window.location.href = "/login?next=/label/next";
          return null;
        }
        if (response.status === 503) {
          // The database is restarting or failing over: nothing was stored. Keep the
          // ratings and send them again by ourselves once the server says to.
          var wait = retryAfter(response);
          if (task && task.section === section) {
            task.sending = false;
            render();
            setStatus("The database is briefly away. Your ratings are kept: sending again in " +
              wait + " s.", true);
            task.resend = setTimeout(function () {
              if (task && task.section === section) submit(reason, note, body);
            }, wait * 1000);
          }
          return null;
        }
        return response.json().then(function (data) {
          return { ok: response.ok, status: response.status, data: data };
        });
      })
      .then(function (result) {
        if (!result) return;
        if (result.status === 404 || result.status === 409) {
          leaveLostTask();
          return;
        }
        if (!result.ok) throw new Error(detail(result.data));
        localStorage.removeItem(draftKey());
        if (result.data.created) loadNext("Saved.", false, "Saved.");
        else loadNext("This task was already sent, from another tab or an earlier try: the " +
          "first submission was kept, not this one. Here is your next task.", true,
          "This task was already sent: the first submission was kept, not this one.");
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

  // Not this labeler's any more: nothing to send or retry, so on to the next task, with a
  // warning that stays above it (a status line of this task would go with the next key).
  function leaveLostTask() {
    localStorage.removeItem(draftKey());
    task.sending = true; // no more ratings or submits on it while the next task loads
    loadNext("This task is no longer yours: its lease ran out and it went to another " +
      "labeler, so these ratings were not saved. Here is your next task.", true,
      "This task is no longer yours, so these ratings were not saved.");
  }

  function detail(data) {
    if (data && Array.isArray(data.detail)) {
      return data.detail.map(function (d) { return d.msg; }).join("; ");
    }
    return (data && data.detail) || "The server refused the label.";
  }

  // Swap in the next task, from its top, with a message above it (a warning: set apart).
  // The page goes to its top first, and init then scrolls down only as far as the first
  // step needs to clear the footer: a long problem would leave it under the footer.
  // ``outcome``: what became of the task left, said while the next one waits for the
  // database (a lost task's ratings were not saved: never "Saved." then).
  function loadNext(message, warning, outcome) {
    var before = document.getElementById("task");
    htmx.ajax("GET", "/label/next", { target: "#task", swap: "outerHTML" }).then(function () {
      if (document.getElementById("task") === before) {
        // Not swapped: htmx swaps no 503 (the database away) and nothing when offline.
        // The next task comes when the server answers again.
        if (task && task.section === before) {
          setStatus(outcome + " The database is briefly away: your next task loads in " +
            AWAY_RETRY_S + " s.", true);
        }
        setTimeout(function () { loadNext(message, warning, outcome); }, AWAY_RETRY_S * 1000);
        return;
      }
      var flash = document.querySelector(".flash");
      if (flash) {
        flash.textContent = message;
        flash.classList.toggle("warning", !!warning);
      }
      window.scrollTo(0, 0);
      init(document.getElementById("task"));
    });
  }

  function heartbeatMs(section) {
    // `|| 0`: a missing attribute beats at the floor rather than make the interval NaN,
    // which setInterval takes as 0, a beat at every turn of the event loop.
    var leaseMs = (Number(section.dataset.leaseMinutes) || 0) * 60 * 1000;
    return Math.max(HEARTBEAT_FLOOR_MS, Math.round(leaseMs / 3));
  }

  function heartbeat() {
    if (!task) return;
    var section = task.section;
    fetch(section.dataset.heartbeatUrl, {
      method: "POST",
      credentials: "same-origin",
      headers: { "X-CSRF-Token": csrfToken() },
    }).then(function (response) {
      // 409: finished or taken over; 404: the lease ran out and the task went to another
      // labeler (the server tells that apart from "never yours" no better than submit does).
      // A submit in flight says itself what became of the task.
      var gone = response.status === 404 || response.status === 409;
      if (gone && task && task.section === section && !task.sending) leaveLostTask();
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

  // One labeler's draft of one lease of the task: a take-over of an expired lease hands the
  // same assignment to another labeler, who must not find the ratings and the time of the
  // one before in a browser they share. (static/js/htmx-setup.js forgets every
  // "steplabel:task:" draft at logout.)
  function draftKey() {
    return "steplabel:task:" + task.id + ":" + task.section.dataset.labelerId + ":" +
      task.section.dataset.leasedAt;
  }

  function saveDraft() {
    var draft = {
      ratings: task.ratings, flags: task.flags, alternatives: task.alternatives,
      chosen: task.chosen, human: task.human, history: task.history, elapsed: elapsedMs(),
    };
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
    task.chosen = draft.chosen || task.chosen;
    task.human = draft.human || task.human;
    task.history = Array.isArray(draft.history) ? draft.history : [];
    task.elapsed = draft.elapsed || 0;
  }

  // A box in a dialog that just closed can keep the focus for a moment (Chromium moves it
  // away only at the next style update): a key pressed then is meant for the page.
  function typing(event) {
    var element = event.target;
    if (!element || (element.closest && element.closest("dialog:not([open])"))) return false;
    return element.tagName === "TEXTAREA" || element.tagName === "INPUT" || element.isContentEditable;
  }

  // Enter on a focused link or button presses it, as it should everywhere, a rating or
  // Unsure button too (a rating or Unsure button clicked with the mouse lets the focus go:
  // see letGoOfMouseFocus); but not a button left focused inside a dialog that just closed
  // (it is no longer on screen).
  function activatesFocused(event) {
    if (event.key !== "Enter" || !event.target || !event.target.closest) return false;
    var control = event.target.closest("a, button");
    return !!control && !control.closest("dialog:not([open])") && control.offsetParent !== null;
  }

  // A rating or Unsure button clicked with the mouse gives the focus back to the page, so
  // that Enter then submits, as after a key, instead of pressing the button again. One
  // reached with Tab keeps it, for Enter or Space to press. Told apart by the click's count
  // (0 for a click that Enter or Space made), not by :focus-visible, which Chromium turns on
  // for a mouse-focused button at the first key pressed: the very Enter asked about.
  function letGoOfMouseFocus(event) {
    var button = event.target.closest && event.target.closest("[data-rating], [data-action='flag']");
    if (button && event.detail > 0) button.blur();
  }

  document.addEventListener("keydown", function (event) {
    if (!task || typing(event) || event.ctrlKey || event.metaKey || event.altKey) return;
    if (activatesFocused(event)) return;
    if (document.querySelector("dialog[open]")) return;
    if (task.choosing !== null && chooseByKey(event)) {
      event.preventDefault();
      return;
    }
    var values = { "1": -1, "2": 0, "3": 1 };
    var current = target();
    if (event.key in values) {
      // The keys rate the highlighted step: the labeler is back on it, not on a focused
      // one. Left before rating: the rating may focus a box to write the next step in.
      if (focusedStep() !== -1) document.activeElement.blur();
      if (current) rate(current.step, current.alternative, values[event.key]);
    } else if (event.key === "f") {
      toggleFlag(cursorStep());
    } else if (event.key === "u") {
      undo();
    } else if (task.phase1 && event.key === "c") {
      startChoosing();
    } else if (task.phase1 && event.key === "w") {
      if (choiceStep() === -1) setStatus("Rate the candidates of step 1 first.");
      else writeOwn(choiceStep());
    } else if (event.key === "Enter") {
      submitComplete();
    } else if (event.key === "b") {
      askReason("bad_problem");
    } else if (event.key === "g") {
      askReason("give_up");
    } else if (event.key === "?") {
      showKeys();
    } else {
      return;
    }
    event.preventDefault();
  });

  // Logging out (static/js/htmx-setup.js forgets the drafts then) ends the task here too:
  // the page, hidden as it unloads, would save its draft again.
  document.addEventListener("submit", function (event) {
    if (event.target.matches && event.target.matches("form.logout")) init(null);
  });

  document.addEventListener("DOMContentLoaded", function () {
    init(document.getElementById("task"));
  });
})();
