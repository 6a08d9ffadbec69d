// Trends page: keep the address in step with the zoom (from/to), so the link shares the view;
// open an alert when its marker is clicked. charts.js has drawn the figure already.
(function () {
  "use strict";
  var chart = document.getElementById("trend-chart");
  var share = document.querySelector("[data-share]");
  if (!chart || !window.Plotly) { return; }

  function day(value) {
    // Plotly hands back "2026-01-31 12:34:56.789"; keep minutes, written as ISO.
    return String(value).replace(" ", "T").slice(0, 16);
  }

  function setRange(from, to) {
    var url = new URL(window.location.href);
    if (from && to) {
      url.searchParams.set("from", day(from));
      url.searchParams.set("to", day(to));
    } else {
      url.searchParams.delete("from");
      url.searchParams.delete("to");
    }
    window.history.replaceState(null, "", url.toString());
    if (share) { share.value = url.toString(); }
    document.querySelectorAll("[data-scale]").forEach(function (link) {
      var target = new URL(link.href);
      ["from", "to"].forEach(function (name) {
        if (url.searchParams.has(name)) { target.searchParams.set(name, url.searchParams.get(name)); }
        else { target.searchParams.delete(name); }
      });
      link.href = target.toString();
    });
  }

  function bind() {
    if (!chart.on) { window.setTimeout(bind, 50); return; }
    chart.on("plotly_relayout", function (event) {
      if (event["xaxis.autorange"]) { setRange(null, null); return; }
      var range = event["xaxis.range"];
      if (range) { setRange(range[0], range[1]); return; }
      if (event["xaxis.range[0]"] !== undefined) { setRange(event["xaxis.range[0]"], event["xaxis.range[1]"]); }
    });
    chart.on("plotly_click", function (event) {
      var point = event.points && event.points[0];
      if (!point || !point.data.meta || point.data.meta.role !== "alerts") { return; }
      window.location.href = point.customdata;
    });
  }
  bind();

  var copy = document.getElementById("share-copy");
  if (copy && share) {
    copy.addEventListener("click", function () {
      share.select();
      if (navigator.clipboard) { navigator.clipboard.writeText(share.value).catch(function () {}); }
      copy.textContent = "Copied";
    });
  }
})();
