// Live updates: when the server says what this page shows has changed, reload it, unless a
// decision is being typed (then offer a reload link instead of losing the text).
(function () {
  "use strict";
  var address = document.body.getAttribute("data-live");
  if (!address || !window.EventSource) { return; }
  var source = new EventSource(address);
  source.addEventListener("changed", function () {
    source.close();
    var typing = Array.prototype.some.call(
      document.querySelectorAll("input[name=reason]"),
      function (field) { return field.value !== ""; }
    );
    if (typing) {
      document.getElementById("stale").hidden = false;
    } else {
      window.location.reload();
    }
  });
})();
