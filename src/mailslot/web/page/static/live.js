// Live chat: server-sent events append each new message as text (textContent, never HTML).
"use strict";
(function () {
  var list = document.getElementById("messages");
  if (!list || !window.EventSource) { return; }
  var state = document.getElementById("live-status");
  var source = new EventSource(list.getAttribute("data-events"));
  function add(m) {
    var li = document.createElement("li");
    li.className = m.kind === "message" ? "message" : "marker";
    if (m.human) { li.className += " human"; }
    var header = document.createElement("header");
    var from = document.createElement("b");
    from.className = "from";
    from.textContent = m.from;
    var time = document.createElement("time");
    time.textContent = " " + m.time;
    header.appendChild(from);
    header.appendChild(time);
    var text = document.createElement("p");
    text.className = "text";
    text.textContent = m.body;
    li.appendChild(header);
    li.appendChild(text);
    list.appendChild(li);
  }
  var live = "live";  // or, while the server polls the chat file, what it says about that
  source.addEventListener("watch", function (ev) {
    var data = JSON.parse(ev.data);
    live = data.polling ? "live, polled: " + data.why : "live";
    if (state && state.textContent !== "ended") { state.textContent = live; }
  });
  source.addEventListener("message-batch", function (ev) {
    var data = JSON.parse(ev.data);
    if (data.restart) { list.textContent = ""; }  // the file was cut or replaced: shown anew
    data.messages.forEach(add);
    if (state) { state.textContent = data.ended ? "ended" : live; }
    window.__mailslotSeen = (window.__mailslotSeen || 0) + data.messages.length;
  });
  source.addEventListener("summary", function (ev) {
    var summary = document.getElementById("live-summary");
    if (summary) { summary.textContent = JSON.parse(ev.data).summary; }
  });
  source.addEventListener("open", function () {
    live = "live";  // a new stream says again if it polls
    if (state) { state.textContent = live; }
  });
  source.addEventListener("error", function () { if (state) { state.textContent = "reconnecting"; } });
}());
