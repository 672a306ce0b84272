// Live updates for the board: when the server says goals moved, the page's content is fetched
// again and swapped in. Without this script every page still works; it is only fresher.
(function () {
  "use strict";
  var main = document.getElementById("content");
  if (!main || !main.dataset.live || !window.EventSource || !window.fetch) return;
  var follows = main.dataset.live;
  var events = new EventSource("/events");
  events.addEventListener("changed", function (event) {
    var moved = event.data.split("\n");
    if (follows !== "all" && moved.indexOf(follows) < 0) return;
    // A form being filled in is never replaced under the person's hands.
    var active = document.activeElement;
    if (active && active.form && active.value) return;
    fetch(window.location.href, { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (text) {
        if (!text) return;
        var next = new DOMParser().parseFromString(text, "text/html").getElementById("content");
        if (next) {
          main.innerHTML = next.innerHTML;
          main.dataset.updated = String(Date.now());
        }
      });
  });
})();
