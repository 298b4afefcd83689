// Draws every chart of a report page from the JSON in <script id="chart-data"> with the locally
// shipped Plotly (static/plotly.min.js). No network, no inline script: works from file:// under
// the page's Content-Security-Policy. Without Plotly the page keeps its tables and SVG.
(function () {
  "use strict";
  function draw() {
    var holder = document.getElementById("chart-data");
    if (!holder) { return; }
    var charts = JSON.parse(holder.textContent);
    if (typeof Plotly === "undefined") {
      document.querySelectorAll(".plot").forEach(function (el) {
        el.textContent = "Interactive chart unavailable: static/plotly.min.js did not load.";
      });
      return;
    }
    charts.forEach(function (chart) {
      var el = document.getElementById(chart.id);
      if (!el) { return; }
      Plotly.newPlot(el, chart.figure.data, chart.figure.layout,
        { responsive: true, displaylogo: false, modeBarButtonsToRemove: ["toImage"] });
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
