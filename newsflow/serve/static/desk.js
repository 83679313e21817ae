// The live board: applies the server-sent "board" events (the ranked ids of the stories that
// match the page's filters, and the cards of those that changed) to the list, without a reload.
// Every feed-supplied string is written with textContent; a link is set only when it is http(s).
"use strict";
(function () {
  const board = document.getElementById("board");
  const template = document.getElementById("card-template");
  if (!board || !template || !window.EventSource) { return; }
  const SVG = "http://www.w3.org/2000/svg";
  const PHASE = /^[a-z]+$/;
  const HTTP = /^https?:\/\/[^\s<>"']+$/i;

  function fmtTime(iso) {  // the same as fmt_time of newsflow/serve/app.py
    const s = String(iso || "");
    return s.length >= 16 ? s.slice(0, 10) + " " + s.slice(11, 16) + " UTC" : s;
  }

  function field(node, name) { return node.querySelector('[data-f="' + name + '"]'); }

  function setText(node, name, value) {
    const el = field(node, name);
    if (el) { el.textContent = value === null || value === undefined ? "" : String(value); }
  }

  function drawTimeline(svg, bins) {  // the bars of the timeline macro of templates/macros.html
    while (svg.firstChild) { svg.removeChild(svg.firstChild); }
    const top = bins.length ? Math.max.apply(null, bins) : 0;
    bins.forEach(function (n, i) {
      const h = top ? Math.round(220 * n / top) / 10 : 0;
      const rect = document.createElementNS(SVG, "rect");
      rect.setAttribute("x", String(i * 10 + 1));
      rect.setAttribute("y", String(24 - h));
      rect.setAttribute("width", "8");
      rect.setAttribute("height", String(h));
      const title = document.createElementNS(SVG, "title");
      title.textContent = String(n);
      rect.appendChild(title);
      svg.appendChild(rect);
    });
  }

  function fill(node, c) {
    node.id = "story-" + c.id;
    node.dataset.storyId = c.id;
    node.className = "card" + (PHASE.test(c.phase) ? " phase-" + c.phase : "");
    setText(node, "phase", c.phase);
    setText(node, "importance", Math.round(c.importance));
    const label = field(node, "label");
    label.textContent = c.label;
    label.setAttribute("href", "/story/" + encodeURIComponent(c.id));
    const link = field(node, "lead_link");
    const text = field(node, "lead_text");
    link.textContent = c.lead_title;
    text.textContent = c.lead_title;
    if (typeof c.lead_url === "string" && HTTP.test(c.lead_url)) {
      link.setAttribute("href", c.lead_url);
      link.hidden = false;
      text.hidden = true;
    } else {
      link.removeAttribute("href");
      link.hidden = true;
      text.hidden = false;
    }
    setText(node, "lead_publisher", c.lead_publisher);
    setText(node, "lead_tier", c.lead_tier);
    setText(node, "lead_time", fmtTime(c.lead_time));
    setText(node, "publisher_count", c.publisher_count);
    setText(node, "publishers", (c.publishers || []).join(", "));
    setText(node, "article_count", c.article_count);
    setText(node, "publisher_word", c.publisher_count === 1 ? "publisher" : "publishers");
    setText(node, "article_word", c.article_count === 1 ? "article" : "articles");
    setText(node, "first_seen", fmtTime(c.first_seen));
    setText(node, "last_seen", fmtTime(c.last_seen));
    const svg = node.querySelector("svg.timeline");
    if (svg) { drawTimeline(svg, c.timeline || []); }
    node.dataset.seenAt = String(Date.now());  // when this version reached the page
    node.classList.add("fresh");
    window.setTimeout(function () { node.classList.remove("fresh"); }, 4000);
  }

  function apply(data) {
    const nodes = new Map();
    Array.prototype.forEach.call(board.children, function (n) { nodes.set(n.dataset.storyId, n); });
    (data.cards || []).forEach(function (c) {
      let node = nodes.get(c.id);
      if (!node) {
        node = template.content.firstElementChild.cloneNode(true);
        node.dataset.addedAt = String(Date.now());  // when the story first reached the page
        nodes.set(c.id, node);
      }
      fill(node, c);
    });
    const keep = new Set(data.order);
    nodes.forEach(function (n, id) { if (!keep.has(id) && n.parentNode) { n.parentNode.removeChild(n); } });
    data.order.forEach(function (id) {  // (appendChild moves a node: the list ends in this order)
      const n = nodes.get(id);
      if (n) { board.appendChild(n); }
    });
    board.dataset.version = String(data.version);
    const shown = document.getElementById("shown");
    if (shown) { shown.textContent = String(data.order.length); }
    const total = document.getElementById("total");
    const of = document.getElementById("of");
    if (total && of) {
      total.textContent = String(data.total);
      of.hidden = data.total === data.order.length;
    }
    const empty = document.getElementById("empty");
    if (empty) { empty.hidden = data.order.length > 0; }
  }

  const url = new URL(board.dataset.events, window.location.href);
  const live = document.getElementById("live");
  let source = null;

  function connect() {
    url.searchParams.set("since", board.dataset.version || "0");
    source = new EventSource(url.toString());
    source.addEventListener("board", function (e) { apply(JSON.parse(e.data)); });
    source.addEventListener("open", function () { if (live) { live.className = "live on"; } });
    source.addEventListener("error", function () { if (live) { live.className = "live off"; } });
  }

  // a page left (or kept in the back-forward cache) closes its stream: a browser allows only a
  // few open connections per server
  window.addEventListener("pagehide", function () { if (source) { source.close(); source = null; } });
  window.addEventListener("pageshow", function (e) { if (e.persisted && !source) { connect(); } });
  connect();
})();
