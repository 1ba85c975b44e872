// rca incident page: clicking a node in the causal graph selects its row in the causes table.
document.querySelectorAll("#causal-graph g.node").forEach(function (node) {
  node.style.cursor = "pointer";
  node.addEventListener("click", function () {
    var name = node.getAttribute("data-node");
    document.querySelectorAll(".selected").forEach(function (el) { el.classList.remove("selected"); });
    node.classList.add("selected");
    var row = Array.prototype.find.call(document.querySelectorAll("table.causes tr[data-node]"), function (r) {
      return r.getAttribute("data-node") === name;
    });
    if (row) { row.classList.add("selected"); row.scrollIntoView({ block: "center", behavior: "smooth" }); }
  });
});
