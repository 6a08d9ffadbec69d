// Host telemetry page: fetch fresh figures every data-refresh-ms and redraw them in place with
// Plotly.react (no page reload; the layout's uirevision keeps the user's zoom and hidden GPUs).
(function () {
  "use strict";
  var status = document.getElementById("refresh-status");
  if (!status || !window.Plotly) { return; }
  var url = status.dataset.refreshUrl;
  var every = parseInt(status.dataset.refreshMs, 10) || 15000;
  var charts = document.getElementById("host-charts");
  var empty = document.getElementById("telemetry-empty");
  var busy = false;

  function apply(payload) {
    var hasData = Boolean(payload.has_data);
    var reveal = hasData && charts.hidden;
    charts.hidden = !hasData;
    empty.hidden = hasData;
    Object.keys(payload.figures).forEach(function (key) {
      var el = document.getElementById(key + "-chart");
      if (!el) { return; }
      var figure = payload.figures[key];
      window.Plotly.react(el, figure.data, figure.layout, {responsive: true, displaylogo: false});
      if (reveal) { window.Plotly.Plots.resize(el); }
    });
    var updated = status.querySelector("[data-updated]");
    if (updated) { updated.textContent = payload.generated_at.slice(0, 19); }
    status.dataset.refreshed = String(parseInt(status.dataset.refreshed || "0", 10) + 1);
    status.classList.remove("error");
  }

  function refresh() {
    if (busy || document.hidden) { return; }
    busy = true;
    fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"}})
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.json();
      })
      .then(apply)
      .catch(function (error) {
        status.classList.add("error");
        status.dataset.error = String(error);
      })
      .finally(function () { busy = false; });
  }

  window.setInterval(refresh, every);
})();
