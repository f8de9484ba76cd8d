// The message browser's live tail: new records arrive as server-sent events and are added
// on top of a table (at most 500 kept). The filters of the form (partition, key, value
// substring) apply. Clicking again stops it; leaving the page closes the stream.
(function () {
  const button = document.getElementById("live-tail");
  if (!button) return;
  const table = document.getElementById("tail");
  const body = table.querySelector("tbody");
  const status = document.getElementById("tail-status");
  let source = null;
  function cell(text, kind) {
    const td = document.createElement("td");
    if (kind) td.className = kind;
    const pre = document.createElement("pre");
    pre.textContent = text;
    td.appendChild(pre);
    return td;
  }
  button.addEventListener("click", function () {
    if (source) { source.close(); source = null; button.textContent = "Live tail"; status.textContent = "stopped"; return; }
    const form = new FormData(document.getElementById("browse"));
    const params = new URLSearchParams();
    for (const name of ["partition", "key", "contains"]) { if (form.get(name)) params.set(name, form.get(name)); }
    source = new EventSource(button.dataset.url + "?" + params.toString());
    table.hidden = false;
    button.textContent = "Stop tail";
    status.textContent = "waiting for new records";
    let skipped = 0;
    source.addEventListener("ready", function () { status.textContent = "tailing: new records appear here"; });
    source.addEventListener("skipped", function (event) {
      skipped += JSON.parse(event.data).records;
      status.textContent = "tailing; " + skipped + " records skipped to keep up with the topic";
    });
    source.addEventListener("error", function (event) {
      if (event.data) { status.textContent = JSON.parse(event.data).error; source.close(); source = null; button.textContent = "Live tail"; }
    });
    source.onmessage = function (event) {
      const m = JSON.parse(event.data);
      const row = document.createElement("tr");
      row.className = "message";
      row.appendChild(cell(String(m.partition)));
      row.appendChild(cell(String(m.offset)));
      row.appendChild(cell(new Date(m.timestamp).toISOString()));
      row.appendChild(cell(m.key.text, m.key.kind));
      row.appendChild(cell(m.value.text, m.value.kind));
      row.appendChild(cell(m.headers.map(function (h) { return h[0] + ": " + h[1].text; }).join("\n")));
      body.insertBefore(row, body.firstChild);
      while (body.children.length > 500) body.removeChild(body.lastChild);
    };
  });
})();
