// The group page's lag chart: every refresh of the lag table (htmx, every 2 s) adds the
// total lag it shows as a point, so the chart covers the time the page has been open.
(function () {
  const canvas = document.getElementById("lag-chart");
  if (!canvas || typeof Chart === "undefined") return;
  const chart = new Chart(canvas, {
    type: "line",
    data: { labels: [], datasets: [{ label: "total lag", data: [], borderColor: "#2a6f97", tension: 0.2 }] },
    options: { animation: false, scales: { y: { beginAtZero: true } } },
  });
  function sample() {
    const total = document.getElementById("total-lag");
    if (!total) return;
    chart.data.labels.push(new Date().toLocaleTimeString());
    chart.data.datasets[0].data.push(Number(total.dataset.total));
    if (chart.data.labels.length > 300) { chart.data.labels.shift(); chart.data.datasets[0].data.shift(); }
    chart.update();
  }
  sample();
  document.body.addEventListener("htmx:afterSwap", function (event) {
    if (event.target.id === "group-live") sample();
  });
})();
