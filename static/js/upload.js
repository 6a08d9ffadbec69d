// Upload page: choose or drop files, preview what the server recognised, fill gaps, save.
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

  function setFiles(files) {
    chosen = Array.prototype.slice.call(files);
    chosenList.textContent = "";
    chosen.forEach(function (file) { chosenList.appendChild(el("li", {}, file.name + " · " + sizeText(file.size))); });
    previewButton.disabled = chosen.length === 0;
    errorBox.textContent = "";
  }

  input.addEventListener("change", function () { setFiles(input.files); });
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
    chosen.forEach(function (file) { data.append("files", file, file.name); });
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
      showProgress(1, "Read " + body.files.length + " file" + (body.files.length === 1 ? "" : "s"));
      renderPreview(body);
    });
    xhr.addEventListener("error", function () { errorBox.textContent = "The upload failed: the server could not be reached."; });
    previewButton.disabled = true;
    xhr.send(data);
  });

  function field(index, name, label, value, placeholder, missing) {
    var wrap = el("label", {"class": "filter" + (missing ? " missing" : "")});
    wrap.appendChild(el("span", {}, label + (missing ? " (missing in the file)" : "")));
    var box;
    if (name === "precision") {
      box = el("select", {name: "f" + index + "-precision", id: "f" + index + "-precision"});
      precisions.forEach(function (choice) {
        var option = el("option", {value: choice[0]}, choice[0] ? choice[1] : (value ? "from file: " + value : "choose…"));
        box.appendChild(option);
      });
    } else {
      box = el("input", {name: "f" + index + "-" + name, id: "f" + index + "-" + name, placeholder: placeholder || ""});
      if (name === "accelerator_count") { box.setAttribute("type", "number"); box.setAttribute("min", "1"); }
    }
    wrap.appendChild(box);
    return wrap;
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

  function renderPreview(body) {
    document.getElementById("upload-token").value = body.token;
    previews.textContent = "";
    body.files.forEach(function (file) {
      var card = el("div", {"class": "file-preview", id: "file-" + file.index});
      card.appendChild(el("h3", {}, file.name));
      var error = el("p", {"class": "error file-error", id: "file-" + file.index + "-error"}, file.error || "");
      card.appendChild(error);
      if (!file.error) {
        var first = file.runs[0];
        file.runs.forEach(function (run) {
          var facts = el("p", {"class": "recognised"});
          facts.textContent = run.format + " · model " + (run.model || "unknown") + " · " +
            (run.variant || "variant unknown") + " · precision " + (run.precision || "unknown") + " · hardware " +
            (run.accelerator ? (run.accelerator_count || 1) + "× " + (run.accelerator_type || run.accelerator) : "unknown") +
            (run.started_at ? " · started " + run.started_at : "");
          card.appendChild(facts);
          run.warnings.forEach(function (w) { card.appendChild(el("p", {"class": "warning"}, w)); });
          card.appendChild(metricsTable(run.metrics));
        });
        var missing = {};
        var needs = el("div", {"class": "needs-list"});
        file.runs.forEach(function (run) {
          (run.missing || []).forEach(function (m) {
            missing[m.field] = true;
            needs.appendChild(el("p", {"class": "needs"}, "Needed before saving: " + m.message));
          });
        });
        var extra = el("div", {"class": "overrides"});
        if (missing.model) { extra.appendChild(field(file.index, "model", "Model", "", "e.g. Llama-3.1-8B", true)); }
        var hw = field(file.index, "accelerator", "Hardware", first.accelerator, first.accelerator || "e.g. H100 SXM 80GB", !!missing.accelerator);
        hw.querySelector("input").setAttribute("list", "accelerator-names");
        extra.appendChild(hw);
        extra.appendChild(field(file.index, "accelerator_count", "Count", first.accelerator_count, first.accelerator_count || "1", false));
        extra.appendChild(field(file.index, "precision", "Precision", first.precision, "", !!missing.precision));
        extra.appendChild(field(file.index, "git_commit", "Commit", "", "sha", false));
        extra.appendChild(field(file.index, "branch", "Branch", "", "main", false));
        extra.appendChild(field(file.index, "ci_url", "CI link", "", "https://…", false));
        // What to fill goes above the (long) metrics tables, next to the file's name.
        card.insertBefore(extra, error.nextSibling);
        card.insertBefore(needs, extra);
      }
      previews.appendChild(card);
    });
    document.getElementById("step-review").hidden = false;
    document.getElementById("save-button").disabled = body.files.every(function (f) { return f.error; });
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
        if (!body.files) {
          document.getElementById("save-error").textContent = body.error || ("The server answered " + result.status);
          button.disabled = false;
          return;
        }
        document.getElementById("save-error").textContent = "";
        var saved = document.getElementById("saved");
        saved.textContent = "";
        body.files.forEach(function (file) {
          var slot = document.getElementById("file-" + file.index + "-error");
          if (slot) { slot.textContent = file.error || ""; }
          file.runs.forEach(function (run) {
            var item = el("li");
            var link = el("a", {href: run.url, "class": "saved-run"}, "Run #" + run.id);
            item.appendChild(link);
            item.appendChild(document.createTextNode(" from " + file.name + (run.created ? "" : " (saved before)")));
            saved.appendChild(item);
          });
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
