// Draws the pipeline graph (nodes and edges from the page's JSON) with Cytoscape.js, left
// to right by layer: sources, topics, apps, topics they write, sinks. A click opens a node's page.
(function () {
  const container = document.getElementById("pipeline-graph");
  const data = JSON.parse(document.getElementById("pipeline-data").textContent);
  if (!container || typeof cytoscape === "undefined") return;
  const colors = { source: "#2a9d8f", sink: "#e76f51", topic: "#457b9d", app: "#8d5fd3" };
  const elements = data.nodes.map(function (n) {
    return { data: { id: n.id, label: n.state ? n.label + "\n" + n.state : n.label, kind: n.kind, url: n.url } };
  }).concat(data.edges.map(function (e, i) {
    return { data: { id: "e" + i, source: e.source, target: e.target, rate: "" } };
  }));
  const roots = data.nodes.filter(function (n) {
    return !data.edges.some(function (e) { return e.target === n.id; });
  }).map(function (n) { return "#" + CSS.escape(n.id); });
  const cy = cytoscape({
    container: container,
    elements: elements,
    style: [
      { selector: "node", style: { "label": "data(label)", "text-wrap": "wrap", "text-valign": "bottom",
          "font-size": 11, "background-color": function (n) { return colors[n.data("kind")] || "#999"; },
          "shape": function (n) { return n.data("kind") === "topic" ? "round-rectangle" : "ellipse"; } } },
      { selector: "edge", style: { "curve-style": "bezier", "target-arrow-shape": "triangle", "width": 2,
          "label": "data(rate)", "font-size": 10, "text-background-color": "#fff", "text-background-opacity": 1 } },
    ],
    layout: { name: "breadthfirst", directed: true, roots: roots.length ? roots.join(",") : undefined, spacingFactor: 1.2 },
  });
  // breadthfirst lays layers top to bottom: turn them to run left to right
  cy.nodes().positions(function (n) { const p = n.position(); return { x: p.y * 1.6, y: p.x }; });
  cy.fit(undefined, 30);
  cy.on("tap", "node", function (event) { window.location.href = event.target.data("url"); });
  window.pipelineGraph = cy;

  // Live rates on the edges: records per second between two polls of /pipeline/rates.
  function rateText(rate) {
    if (rate === null || rate === undefined) return "";
    return (rate >= 100 ? Math.round(rate) : rate.toFixed(1)) + "/s";
  }
  function poll() {
    fetch("/pipeline/rates", { headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (body) {
        if (!body) return;
        body.edges.forEach(function (e) {
          const text = rateText(e.rate);
          cy.edges().filter(function (edge) {
            return edge.data("source") === e.source && edge.data("target") === e.target;
          }).data("rate", text);
          const cell = document.querySelector('#edges td.rate[data-source="' + CSS.escape(e.source) +
                                              '"][data-target="' + CSS.escape(e.target) + '"]');
          if (cell) cell.textContent = text || "-";
        });
      })
      .catch(function () { /* the next poll tries again */ });
  }
  poll();
  setInterval(poll, 3000);
})();
