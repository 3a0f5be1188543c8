// The console's glue: draws each chart (an element with class "chart" and its data in data-series:
// {"x": [unix seconds...], "<series>": [values...], ...}, labels in data-labels: {"<series>": "label"})
// with uPlot, whenever htmx loads content: the first page load and every live section swapped in.
"use strict";

const COLOURS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2"];

function drawChart(element) {
  const data = JSON.parse(element.dataset.series || "{}");
  const labels = JSON.parse(element.dataset.labels || "{}");
  const names = Object.keys(data).filter((name) => name !== "x");
  element.replaceChildren();
  if (!data.x || data.x.length < 2) {
    const empty = document.createElement("p");
    empty.className = "muted";
    empty.textContent = element.dataset.empty || "Collecting data…";
    element.append(empty);
    return;
  }
  const options = {
    width: element.clientWidth || 600,
    height: Number(element.dataset.height || 180),
    series: [{}].concat(names.map((name, i) => ({
      label: labels[name] || name, stroke: COLOURS[i % COLOURS.length], width: 2,
    }))),
    axes: [{}, { size: 70 }],
  };
  new uPlot(options, [data.x].concat(names.map((name) => data[name])), element);
}

document.addEventListener("DOMContentLoaded", () => {
  htmx.onLoad((root) => {
    const charts = root.matches && root.matches(".chart") ? [root] : root.querySelectorAll(".chart");
    charts.forEach(drawChart);
  });
});
