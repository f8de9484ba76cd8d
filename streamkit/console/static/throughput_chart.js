// The overview's throughput chart: every 2 s it asks /throughput for the records written to
// all topics so far, and plots the rate since the previous sample (records in per second).
(function () {
  const canvas = document.getElementById("throughput-chart");
  if (!canvas || typeof Chart === "undefined") return;
  const shown = document.getElementById("records-per-second");
  const chart = new Chart(canvas, {
    type: "line",
    data: { labels: [], datasets: [{ label: "records in / s", data: [], borderColor: "#2a9d8f", tension: 0.2 }] },
    options: { animation: false, scales: { y: { beginAtZero: true } } },
  });
  let last = null;
  async function sample() {
    try {
      const response = await fetch("/throughput", { headers: { Accept: "application/json" } });
      if (!response.ok) return;
      const now = await response.json();
      if (last && now.time_ms > last.time_ms) {
        const rate = Math.max(0, (now.records - last.records) * 1000 / (now.time_ms - last.time_ms));
        chart.data.labels.push(new Date(now.time_ms).toLocaleTimeString());
        chart.data.datasets[0].data.push(Math.round(rate));
        if (chart.data.labels.length > 300) { chart.data.labels.shift(); chart.data.datasets[0].data.shift(); }
        chart.update();
        shown.textContent = String(Math.round(rate));
      }
      last = now;
    } catch (error) {
      shown.textContent = "broker unreachable";
    }
  }
  sample();
  setInterval(sample, 2000);
})();
