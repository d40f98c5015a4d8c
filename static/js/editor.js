/* The structured frame editor: each class-list textarea (data-chips) becomes a list of chips that
 * can be reordered by drag and by ↑/↓ buttons (keyboard), removed with ✕, and extended from a
 * picker of the classes the corpus's units carry. The textarea stays the form's value (hidden,
 * one class per line), so the page works without this script and the server parses one format.
 * Every change fires "chips-changed" on the form: the live merge patch beside it recomputes. */
(function () {
  "use strict";

  function classes(textarea) {
    return textarea.value.split("\n").map(function (s) { return s.trim(); }).filter(Boolean);
  }

  function button(text, label, onClick) {
    var b = document.createElement("button");
    b.type = "button";
    b.className = "chip-button";
    b.textContent = text;
    b.setAttribute("aria-label", label);
    b.addEventListener("click", onClick);
    return b;
  }

  function enhance(textarea, known) {
    var name = textarea.getAttribute("data-chips");
    var form = textarea.form;
    var box = document.createElement("div");
    box.className = "chip-editor";
    var list = document.createElement("ol");
    list.className = "chips chip-list";
    list.setAttribute("aria-label", "classes of " + name + ", most preferred first");
    var status = document.createElement("p");
    status.className = "visually-hidden";
    status.setAttribute("aria-live", "polite");
    var dragged = null;

    function write(values, message) {
      textarea.value = values.join("\n");
      render(values);
      if (message) { status.textContent = message; }
      form.dispatchEvent(new CustomEvent("chips-changed", {bubbles: true}));
    }

    function move(values, from, to) {
      var moved = values.splice(from, 1)[0];
      values.splice(to, 0, moved);
      return moved;
    }

    function render(values) {
      list.textContent = "";
      values.forEach(function (cls, i) {
        var li = document.createElement("li");
        li.className = "chip editable" + (known.indexOf(cls) < 0 ? " unknown" : "");
        li.draggable = true;
        li.setAttribute("data-class", cls);
        var rank = document.createElement("span");
        rank.className = "rank";
        rank.textContent = String(i + 1);
        var text = document.createElement("span");
        text.className = "chip-name";
        text.textContent = cls + (known.indexOf(cls) < 0 ? " (no unit carries it)" : "");
        li.appendChild(rank);
        li.appendChild(text);
        li.appendChild(button("↑", "move " + cls + " up", function () {
          if (i === 0) { return; }
          var v = classes(textarea); move(v, i, i - 1);
          write(v, cls + " moved to position " + i);
          list.querySelectorAll("li")[i - 1].querySelector("[aria-label^='move " + cls + " up']").focus();
        }));
        li.appendChild(button("↓", "move " + cls + " down", function () {
          var v = classes(textarea);
          if (i >= v.length - 1) { return; }
          move(v, i, i + 1);
          write(v, cls + " moved to position " + (i + 2));
          list.querySelectorAll("li")[i + 1].querySelector("[aria-label^='move " + cls + " down']").focus();
        }));
        li.appendChild(button("✕", "remove " + cls, function () {
          var v = classes(textarea); v.splice(i, 1);
          write(v, cls + " removed");
          picker.focus();
        }));
        li.addEventListener("dragstart", function (e) { dragged = i; e.dataTransfer.setData("text/plain", cls); });
        li.addEventListener("dragover", function (e) { e.preventDefault(); });
        li.addEventListener("drop", function (e) {
          e.preventDefault();
          if (dragged === null || dragged === i) { return; }
          var v = classes(textarea); move(v, dragged, i); dragged = null;
          write(v, cls + " order changed");
        });
        list.appendChild(li);
      });
      // the picker offers the corpus's classes not already in the list
      picker.textContent = "";
      var prompt = document.createElement("option");
      prompt.value = "";
      prompt.textContent = "add a class…";
      picker.appendChild(prompt);
      known.filter(function (c) { return values.indexOf(c) < 0; }).forEach(function (c) {
        var o = document.createElement("option");
        o.value = c; o.textContent = c;
        picker.appendChild(o);
      });
    }

    var picker = document.createElement("select");
    picker.className = "chip-picker";
    picker.setAttribute("aria-label", "add a class to " + name);
    var add = button("Add", "add the chosen class to " + name, function () {
      if (!picker.value) { return; }
      var v = classes(textarea); v.push(picker.value);
      write(v, picker.value + " added at position " + v.length);
    });
    add.textContent = "Add";
    var adder = document.createElement("div");
    adder.className = "chip-adder";
    adder.appendChild(picker);
    adder.appendChild(add);

    box.appendChild(list);
    box.appendChild(adder);
    box.appendChild(status);
    textarea.parentNode.insertBefore(box, textarea);
    // the textarea stays in the form and can still be edited as text: shown behind a toggle
    var details = document.createElement("details");
    details.className = "as-text";
    var summary = document.createElement("summary");
    summary.textContent = "edit as text";
    details.appendChild(summary);
    textarea.parentNode.insertBefore(details, textarea);
    details.appendChild(textarea);
    textarea.addEventListener("input", function () { render(classes(textarea)); });
    render(classes(textarea));
  }

  document.addEventListener("DOMContentLoaded", function () {
    var source = document.getElementById("corpus-classes");
    var known = source ? JSON.parse(source.textContent) : [];
    document.querySelectorAll("textarea[data-chips]").forEach(function (t) { enhance(t, known); });
  });
})();
