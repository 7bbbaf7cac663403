(function () {
  "use strict";
  var details = document.getElementById("details");
  var empty = document.getElementById("details-empty");
  function select(id) {
    var panel = details.querySelector('.node-detail[data-node="' + id + '"]');
    if (!panel) { return false; }
    details.querySelectorAll(".node-detail").forEach(function (d) { d.hidden = d !== panel; });
    if (empty) { empty.hidden = true; }
    document.querySelectorAll("#tree g.node").forEach(function (g) {
      var on = g.getAttribute("data-node") === String(id);
      g.classList.toggle("selected", on);
      g.setAttribute("aria-pressed", on ? "true" : "false");
    });
    details.setAttribute("data-selected", String(id));
    details.scrollTop = 0;
    return true;
  }
  document.querySelectorAll("#tree g.node").forEach(function (g) {
    g.addEventListener("click", function () { select(g.getAttribute("data-node")); });
    g.addEventListener("keydown", function (e) {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); select(g.getAttribute("data-node")); }
    });
  });
  document.querySelectorAll("#chart circle.attempt, #calibration-plot circle.calibration-point").forEach(function (c) {
    c.addEventListener("click", function () {
      if (select(c.getAttribute("data-node"))) {
        document.getElementById("tree-section").scrollIntoView();
      }
    });
  });
  var m = /^#node-(\d+)$/.exec(window.location.hash);
  if (m) { select(m[1]); }
  window.ksearchSelectNode = select;
})();
