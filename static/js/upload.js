// Upload page: choose or drop files, preview what the server recognised (the files are one
// submission: one card per run, each naming its files), pick or add what the files do not say, save.
// Step 1 sends the files with XMLHttpRequest (fetch has no upload progress events) to the preview
// endpoint, which parses and keeps them under a token; step 2 posts the token and the uploader's
// additions with fetch. Everything the server sent is written with textContent, never as HTML.
(function () {
  "use strict";
  var form = document.getElementById("upload-form");
  if (!form) { return; }
  var input = document.getElementById("file-input");
  var zone = document.getElementById("dropzone");
  var chosenList = document.getElementById("chosen");
  var previewButton = document.getElementById("preview-button");
  var errorBox = document.getElementById("upload-error");
  var progress = document.getElementById("progress");
  var bar = document.getElementById("progress-bar");
  var progressText = document.getElementById("progress-text");
  var previews = document.getElementById("previews");
  var chosen = [];
  var precisions = JSON.parse(document.getElementById("precision-choices").textContent);
  var scenarios = JSON.parse(document.getElementById("scenario-choices").textContent);
  var catalogue = JSON.parse(document.getElementById("upload-catalogue").textContent);
  var csrf = form.querySelector("input[name=csrfmiddlewaretoken]").value;

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }

  function sizeText(bytes) {
    if (bytes >= 1048576) { return (bytes / 1048576).toFixed(1) + " MB"; }
    if (bytes >= 1024) { return (bytes / 1024).toFixed(1) + " KB"; }
    return bytes + " B";
  }

  // A file's name as sent: its path inside a chosen folder, else its name.
  function pathOf(file) { return file.webkitRelativePath || file.name; }

  function setFiles(files) {
    chosen = Array.prototype.slice.call(files);
    chosenList.textContent = "";
    chosen.forEach(function (file) { chosenList.appendChild(el("li", {}, pathOf(file) + " · " + sizeText(file.size))); });
    previewButton.disabled = chosen.length === 0;
    errorBox.textContent = "";
  }

  input.addEventListener("change", function () { setFiles(input.files); });
  var folderInput = document.getElementById("folder-input");
  folderInput.addEventListener("change", function () { setFiles(folderInput.files); });
  // Files chosen before this script ran (a slow load, or the browser restoring the form on Back)
  // fired their change event with no listener: take them now.
  if (input.files && input.files.length) { setFiles(input.files); }
  ["dragenter", "dragover"].forEach(function (name) {
    zone.addEventListener(name, function (event) { event.preventDefault(); zone.classList.add("over"); });
  });
  ["dragleave", "drop"].forEach(function (name) {
    zone.addEventListener(name, function (event) { event.preventDefault(); zone.classList.remove("over"); });
  });
  zone.addEventListener("drop", function (event) { setFiles(event.dataTransfer.files); });

  function showProgress(fraction, text) {
    progress.hidden = false;
    bar.style.width = Math.round(fraction * 100) + "%";
    progressText.textContent = text;
  }

  previewButton.addEventListener("click", function () {
    var data = new FormData();
    chosen.forEach(function (file) {
      data.append("files", file, file.name);
      data.append("paths", pathOf(file));
    });
    // The team's aliases take part in matching names, so the preview is for the chosen team.
    data.append("team", document.getElementById("team-select").value);
    var xhr = new XMLHttpRequest();
    xhr.open("POST", form.dataset.previewUrl);
    xhr.setRequestHeader("X-CSRFToken", csrf);
    xhr.responseType = "json";
    xhr.upload.addEventListener("progress", function (event) {
      if (event.lengthComputable) {
        showProgress(event.loaded / event.total, "Uploading " + sizeText(event.loaded) + " of " + sizeText(event.total));
      }
    });
    xhr.upload.addEventListener("load", function () { showProgress(1, "Uploaded; reading the files…"); });
    xhr.addEventListener("load", function () {
      var body = xhr.response || {};
      if (xhr.status !== 200) {
        errorBox.textContent = body.error || ("The server answered " + xhr.status);
        return;
      }
      showProgress(1, "Read " + body.files.length + " file" + (body.files.length === 1 ? "" : "s") + " into " +
        body.runs.length + " run" + (body.runs.length === 1 ? "" : "s"));
      renderPreview(body);
    });
    xhr.addEventListener("error", function () { errorBox.textContent = "The upload failed: the server could not be reached."; });
    previewButton.disabled = true;
    xhr.send(data);
  });

  function labelled(label, box, missing, note) {
    var wrap = el("label", {"class": "filter" + (missing ? " missing" : "")});
    wrap.appendChild(el("span", {}, label + (missing ? " (missing in the file)" : "")));
    wrap.appendChild(box);
    if (note) { wrap.appendChild(el("small", {"class": "muted"}, note)); }
    return wrap;
  }

  function textBox(index, name, placeholder, type) {
    var box = el("input", {name: "r" + index + "-" + name, id: "r" + index + "-" + name, placeholder: placeholder || ""});
    if (type) { box.setAttribute("type", type); }
    return box;
  }

  function select(index, name, options) {
    var box = el("select", {name: "r" + index + "-" + name, id: "r" + index + "-" + name});
    options.forEach(function (option) {
      if (option.group) {
        var group = el("optgroup", {label: option.group});
        option.options.forEach(function (item) { group.appendChild(el("option", {value: item[0]}, item[1])); });
        if (option.options.length) { box.appendChild(group); }
      } else {
        box.appendChild(el("option", {value: option[0]}, option[1]));
      }
    });
    return box;
  }

  function metricsTable(metrics) {
    var table = el("table", {"class": "table compact metrics"});
    var head = el("tr");
    ["Metric", "Value", "Unit", "Better"].forEach(function (h) { head.appendChild(el("th", {}, h)); });
    table.appendChild(el("thead")).appendChild(head);
    var body = el("tbody");
    metrics.forEach(function (m) {
      var row = el("tr", {"data-metric": m.name});
      row.appendChild(el("td", {}, m.label));
      row.appendChild(el("td", {"class": "num"}, Number(m.value.toPrecision(6)).toLocaleString("en-US")));
      row.appendChild(el("td", {}, m.unit));
      row.appendChild(el("td", {}, m.direction === "higher" ? "higher ↑" : "lower ↓"));
      body.appendChild(row);
    });
    table.appendChild(body);
    return table;
  }

  var HOW = {exact: "exact name", alias: "alias", user: "your choice", "new": "new to the catalogue"};

  // What a name resolved to: "llama2-70b-99 → Llama-2-70B (alias: llama2-70b, built-in)".
  function matchLine(kind, found) {
    var line = el("p", {"class": "match match-" + (found.how || found.match || "missing"), "data-kind": kind});
    var label = kind === "model" ? "Model" : "Accelerator";
    if (!found.raw) {
      line.textContent = label + ": the file does not name it; choose it below.";
    } else if (found.name && found.how) {
      // the spelling that matched, where it is not the file's own (an accuracy target or a suffix off)
      // (an accelerator matches on its words, in any order: its spellings would say nothing more)
      var spelled = kind === "model" && found.alias && found.alias.toLowerCase() !== found.raw.toLowerCase() ? found.alias : "";
      var how = found.how === "alias" ? (found.source || "built-in") + " alias" + (spelled ? " " + spelled : "") : HOW[found.how];
      line.textContent = label + ": " + found.raw + " → " + found.name + " (" + how + ")" +
        (kind === "model" && found.suffix ? "; its “" + found.suffix + "” sets the variant" : "");
    } else if (found.match === "ambiguous") {
      var close = kind === "model" ? found.candidates : found.candidates.map(function (c) { return c.name; });
      line.textContent = label + ": " + found.raw + " is not in the catalogue; close to " + close.join(", ") +
        ". Pick what it is, or add it as new.";
    } else {
      line.textContent = label + ": " + found.raw + " is not in the catalogue. Pick what it is, or add it as new.";
    }
    return line;
  }

  function toggle(box, panel) {
    // style, not the hidden attribute: the fields' own display rule would win over [hidden]
    function sync() { panel.style.display = box.value === catalogue["new"] ? "" : "none"; }
    box.addEventListener("change", sync);
    sync();
  }

  function identityFields(run, missing) {
    var identity = run.identity || {model: {}, accelerator: {}};
    var model = identity.model || {}, accel = identity.accelerator || {};
    var wrap = el("div", {"class": "identity"});
    wrap.appendChild(matchLine("model", model));
    wrap.appendChild(matchLine("accelerator", accel));
    var row = el("div", {"class": "overrides"});
    var modelFirst = model.name && model.how ? [["", model.name + " (" + HOW[model.how] + ")"]] : [["", "choose…"]];
    var modelBox = select(run.index, "model", modelFirst.concat([
      {group: "Close to the file's name", options: (model.candidates || []).map(function (name) { return [name, name]; })},
      {group: "Catalogue", options: catalogue.models}
    ], [[catalogue["new"], "New model…"]]));
    row.appendChild(labelled("Model", modelBox, !!missing.model));
    var newModel = textBox(run.index, "new_model", "name of the new model");
    newModel.value = model.base || model.raw || "";
    var newModelWrap = labelled("New model's name", newModel, false);
    row.appendChild(newModelWrap);
    toggle(modelBox, newModelWrap);

    var accelFirst = accel.name && accel.how ? [["", accel.name + " (" + HOW[accel.how] + ")"]] : [["", "choose…"]];
    var accelBox = select(run.index, "accelerator", accelFirst.concat([
      {group: "Close to the file's name", options: (accel.candidates || []).map(function (c) { return [c.name, c.name]; })},
      {group: "Catalogue", options: catalogue.accelerators}
    ], [[catalogue["new"], "New accelerator type…"]]));
    row.appendChild(labelled("Accelerator", accelBox, !!missing.accelerator));
    var fresh = el("div", {"class": "overrides new-accelerator"});
    var newName = textBox(run.index, "new_accelerator", "e.g. H100 NVL 94GB");
    newName.value = accel.raw || "";
    fresh.appendChild(labelled("New type's name", newName, false));
    fresh.appendChild(labelled("Vendor", select(run.index, "accelerator_vendor", [["", "choose…"]].concat(catalogue.vendors)), false));
    fresh.appendChild(labelled("Model", textBox(run.index, "accelerator_product", "e.g. H100"), false));
    fresh.appendChild(labelled("Form factor", select(run.index, "accelerator_form_factor", [["", "—"]].concat(catalogue.form_factors)), false));
    fresh.appendChild(labelled("Memory (GB)", textBox(run.index, "accelerator_memory_gb", "e.g. 94", "number"), false));
    fresh.appendChild(labelled("Board power (W)", textBox(run.index, "accelerator_tdp_w", "e.g. 400", "number"), false));
    toggle(accelBox, fresh);
    wrap.appendChild(row);
    wrap.appendChild(fresh);
    if (model.raw || accel.raw) {
      var remember = el("label", {"class": "remember"});
      var check = el("input", {type: "checkbox", name: "r" + run.index + "-remember", id: "r" + run.index + "-remember", value: "1"});
      // Offered checked where the file's name matched nothing without doubt: the next file says it again.
      check.checked = model.match === "ambiguous" || accel.match === "ambiguous" || accel.match === "unknown";
      remember.appendChild(check);
      remember.appendChild(document.createTextNode(" Remember the file's names as this team's aliases of what I pick"));
      wrap.appendChild(remember);
    }
    return wrap;
  }

  function renderRun(run) {
    var card = el("div", {"class": "file-preview run-preview", id: "run-" + run.index});
    card.appendChild(el("h3", {}, "Run " + (run.index + 1) + " · " + run.format));
    card.appendChild(el("p", {"class": "muted run-files"}, "Read from " + run.files.map(function (name) {
      return name.split("/").pop();
    }).join(", ")));
    var error = el("p", {"class": "error run-error", id: "run-" + run.index + "-error"}, run.rejected || "");
    card.appendChild(error);
    var facts = el("p", {"class": "recognised"});
    facts.textContent = run.format + " · model " + (run.model || "unknown") + " · " +
      (run.variant || "variant unknown") + " · precision " + (run.precision || "unknown") + " · hardware " +
      (run.accelerator ? (run.accelerator_count || 1) + "× " + run.accelerator : "unknown") +
      (run.started_at ? " · started " + run.started_at : "");
    card.appendChild(facts);
    if (run.rejected) { return card; }
    var missing = {};
    var needs = el("div", {"class": "needs-list"});
    (run.missing || []).forEach(function (m) {
      missing[m.field] = true;
      needs.appendChild(el("p", {"class": "needs"}, "Needed before saving: " + m.message));
    });
    card.appendChild(needs);
    card.appendChild(identityFields(run, missing));
    var extra = el("div", {"class": "overrides"});
    var count = textBox(run.index, "accelerator_count", run.accelerator_count ? "file: " + run.accelerator_count : "1", "number");
    count.setAttribute("min", "1");
    extra.appendChild(labelled("Count", count, false));
    var precision = el("select", {name: "r" + run.index + "-precision", id: "r" + run.index + "-precision"});
    precisions.forEach(function (choice) {
      precision.appendChild(el("option", {value: choice[0]}, choice[0] ? choice[1] : (run.precision ? "from file: " + run.precision : "choose…")));
    });
    extra.appendChild(labelled("Precision", precision, !!missing.precision));
    // The scenario is what the file says; where it says none, the run is stored as "not stated"
    // unless the uploader picks one (never Offline by default).
    var scenario = el("select", {name: "r" + run.index + "-scenario", id: "r" + run.index + "-scenario"});
    var fileScenario = scenarios.filter(function (c) { return c[0] === run.scenario; });
    scenarios.forEach(function (choice) {
      scenario.appendChild(el("option", {value: choice[0]}, choice[0] ? choice[1] :
        (run.scenario_stated && fileScenario.length ? "from file: " + fileScenario[0][1] : "not stated")));
    });
    extra.appendChild(labelled("Scenario", scenario, false));
    extra.appendChild(labelled("Commit", textBox(run.index, "git_commit", "sha"), false));
    extra.appendChild(labelled("Branch", textBox(run.index, "branch", "main"), false));
    extra.appendChild(labelled("CI link", textBox(run.index, "ci_url", "https://…"), false));
    card.appendChild(extra);
    run.warnings.forEach(function (w) { card.appendChild(el("p", {"class": "warning"}, w)); });
    card.appendChild(metricsTable(run.metrics));
    return card;
  }

  function renderPreview(body) {
    document.getElementById("upload-token").value = body.token;
    previews.textContent = "";
    var list = document.getElementById("files");
    list.textContent = "";
    body.files.forEach(function (file) {
      var item = el("li", {id: "file-" + file.index});
      item.appendChild(el("span", {"class": "file-name"}, file.name));
      var note;
      if (file.error) {
        note = el("span", {"class": "error file-error", id: "file-" + file.index + "-error"}, " · " + file.error);
      } else if (file.profile) {
        // A profiler trace: it is attached to the run saved from the other files.
        note = el("span", {"class": "recognised profile-preview"}, " · profile (" + file.profile.format + ", " +
          file.profile.ranks + " rank" + (file.profile.ranks === 1 ? "" : "s") + (file.profile.steps ? ", " + file.profile.steps + " steps" : "") +
          "): attached to the run saved with it. " + file.profile.verdict);
      } else if (file.runs.length) {
        note = el("span", {"class": "muted"}, " · read into run " + file.runs.map(function (r) { return r + 1; }).join(", "));
      } else {
        note = el("span", {"class": "muted"}, " · not part of any run");
      }
      item.appendChild(note);
      list.appendChild(item);
    });
    body.runs.forEach(function (run) { previews.appendChild(renderRun(run)); });
    document.getElementById("step-review").hidden = false;
    document.getElementById("save-button").disabled = body.runs.length === 0;
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var data = new FormData(form);
    data.delete("files");
    var button = document.getElementById("save-button");
    button.disabled = true;
    fetch(form.dataset.saveUrl, {method: "POST", body: data, headers: {"X-CSRFToken": csrf}, credentials: "same-origin"})
      .then(function (response) { return response.json().then(function (body) { return {status: response.status, body: body}; }); })
      .then(function (result) {
        var body = result.body;
        if (!body.runs) {
          document.getElementById("save-error").textContent = body.error || ("The server answered " + result.status);
          button.disabled = false;
          return;
        }
        document.getElementById("save-error").textContent = "";
        var saved = document.getElementById("saved");
        saved.textContent = "";
        body.runs.forEach(function (run) {
          var slot = document.getElementById("run-" + run.index + "-error");
          if (slot) { slot.textContent = run.error || ""; }
          if (!run.id) { return; }
          var item = el("li");
          item.appendChild(el("a", {href: run.url, "class": "saved-run"}, "Run #" + run.id));
          item.appendChild(document.createTextNode(" (run " + (run.index + 1) + " of the upload" + (run.created ? ")" : ", saved before)")));
          saved.appendChild(item);
        });
        body.files.forEach(function (file) {
          if (file.profile_url) {
            var note = el("li");
            note.appendChild(el("a", {href: file.profile_url, "class": "saved-profile"}, "Profile"));
            note.appendChild(document.createTextNode(" from " + file.name));
            saved.appendChild(note);
          } else if (file.error) {
            var slot = document.getElementById("file-" + file.index + "-error");
            if (slot) { slot.textContent = " · " + file.error; }
            else { document.getElementById("save-error").textContent = file.name + ": " + file.error; }
          }
        });
        document.getElementById("step-done").hidden = saved.children.length === 0;
        button.disabled = result.status === 200;
        if (result.status === 200) {
          // Everything saved: the form has done its job; what is left is where the runs are.
          document.getElementById("step-files").hidden = true;
          document.getElementById("step-review").hidden = true;
        }
        document.getElementById("step-done").scrollIntoView();
      })
      .catch(function () {
        document.getElementById("save-error").textContent = "Saving failed: the server could not be reached.";
        button.disabled = false;
      });
  });
})();
