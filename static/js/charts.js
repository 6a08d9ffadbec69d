// Render every Plotly figure handed over by the server through json_script.
// Each element with data-figure="ID" gets the figure stored in <script id="ID" type="application/json">.
(function () {
  "use strict";
  function render() {
    document.querySelectorAll("[data-figure]").forEach(function (el) {
      var source = document.getElementById(el.dataset.figure);
      if (!source || !window.Plotly) { return; }
      var figure = JSON.parse(source.textContent);
      window.Plotly.newPlot(el, figure.data, figure.layout, {responsive: true, displaylogo: false});
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", render);
  } else {
    render();
  }
})();
