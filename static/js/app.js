/* Loaded on every page. A table or box that scrolls sideways must be reachable by keyboard:
 * give each one that overflows a tab stop and a name, so arrow keys can scroll it. */
(function () {
  "use strict";
  function scrollables(root) {
    (root || document).querySelectorAll("table.grid, .scroll, .scroll-x").forEach(function (box) {
      var overflows = box.scrollWidth > box.clientWidth + 1 && getComputedStyle(box).overflowX !== "visible";
      if (overflows && !box.hasAttribute("tabindex")) {
        box.setAttribute("tabindex", "0");
        if (box.tagName !== "TABLE") {
          box.setAttribute("role", "region");
          var heading = box.querySelector("caption, th");
          box.setAttribute("aria-label", "scrollable table" + (heading ? ": " + heading.textContent.trim() : ""));
        }
      }
    });
  }
  document.addEventListener("DOMContentLoaded", function () { scrollables(document); });
  window.addEventListener("resize", function () { scrollables(document); });
  document.addEventListener("htmx:afterSettle", function (event) { scrollables(event.target); });
})();
