// The group page's lag chart: the total lag over time as the console has sampled it
// (GET /groups/ID/lag/history, kept in the console process), reloaded with every refresh
// of the lag table (htmx, every 2 s), so it shows the lag from before the page was opened.
(function () {
  const canvas = document.getElementById("lag-chart");
  if (!canvas || typeof Chart === "undefined") return;
  const url = canvas.dataset.history;
  const chart = new Chart(canvas, {
    type: "line",
    data: { labels: [], datasets: [{ label: "total lag", data: [], borderColor: "#2a6f97", tension: 0.2 }] },
    options: { animation: false, scales: { y: { beginAtZero: true } } },
  });
  function load() {
    fetch(url, { headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (body) {
        if (!body) return;
        chart.data.labels = body.points.map(function (p) { return new Date(p[0]).toLocaleTimeString(); });
        chart.data.datasets[0].data = body.points.map(function (p) { return p[1]; });
        chart.update();
        canvas.dataset.points = String(body.points.length);
      })
      .catch(function () { /* the next refresh tries again */ });
  }
  load();
  document.body.addEventListener("htmx:afterSwap", function (event) {
    if (event.target.id === "group-live") load();
  });
})();
