/* The structured frame editor. Every control edits a plain form field that stays in the form, so
 * the page works without this script and the server parses one format:
 *  - a list textarea (data-chips, one value per line) becomes chips that reorder by drag and by
 *    ↑/↓ buttons (keyboard), are removed with ✕ and are added from a picker: the corpus's classes
 *    (data-chip-kind="class"; a class no unit carries is added only after "add anyway", which also
 *    ticks the form's confirm box) or free text (data-chip-kind="cue");
 *  - a checkbox group (data-chip-set, the scope) becomes chips with a picker of the rest;
 *  - a number (data-stepper, the class pull) gets − and + buttons;
 *  - the gate limits table gets "remove" per row and "add a limit" for the blank rows.
 * Every change fires "chips-changed" on the form: the live merge patch beside it recomputes. */
(function () {
  "use strict";

  function lines(textarea) {
    return textarea.value.split("\n").map(function (s) { return s.trim(); }).filter(Boolean);
  }

  function el(tag, className, text) {
    var e = document.createElement(tag);
    if (className) { e.className = className; }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }

  function button(text, label, onClick) {
    var b = el("button", "chip-button", text);
    b.type = "button";
    b.setAttribute("aria-label", label);
    b.addEventListener("click", onClick);
    return b;
  }

  function changed(form) {
    form.dispatchEvent(new CustomEvent("chips-changed", {bubbles: true}));
  }

  function option(value, text) {
    var o = el("option", "", text);
    o.value = value;
    return o;
  }

  // Enter in a text box of the editor adds its value instead of submitting the form
  function onEnter(input, action) {
    input.addEventListener("keydown", function (e) {
      if (e.key === "Enter") { e.preventDefault(); action(); }
    });
  }

  function enhanceList(textarea, known) {
    var name = textarea.getAttribute("data-chips");
    var kind = textarea.getAttribute("data-chip-kind") || "class";
    var vocabulary = kind === "class" ? known : null;
    var form = textarea.form;
    var confirmBox = document.getElementById("id_confirm_unknown_classes");
    var box = el("div", "chip-editor");
    box.setAttribute("data-kind", kind);
    var list = el("ol", "chips chip-list");
    list.setAttribute("aria-label", (kind === "cue" ? "cues of " : "classes of ") + name + (kind === "cue" ? "" : ", most preferred first"));
    var status = el("p", "visually-hidden");
    status.setAttribute("aria-live", "polite");
    var dragged = null;
    var picker = null;

    function write(values, message) {
      textarea.value = values.join("\n");
      render(values);
      if (message) { status.textContent = message; }
      changed(form);
    }

    function move(values, from, to) {
      values.splice(to, 0, values.splice(from, 1)[0]);
    }

    function unknown(value) {
      return vocabulary !== null && vocabulary.indexOf(value) < 0;
    }

    function focusButton(index, label) {
      var li = list.querySelectorAll("li")[index];
      var b = li && li.querySelector("[aria-label='" + label + "']");
      if (b) { b.focus(); }
    }

    function render(values) {
      list.textContent = "";
      values.forEach(function (value, i) {
        var li = el("li", "chip editable" + (unknown(value) ? " unknown" : ""));
        li.draggable = true;
        li.setAttribute("data-value", value);
        if (kind === "class") { li.setAttribute("data-class", value); }
        li.appendChild(el("span", "rank", String(i + 1)));
        li.appendChild(el("span", "chip-name", value + (unknown(value) ? " (no unit carries it)" : "")));
        var up = "move " + value + " up";
        var down = "move " + value + " down";
        li.appendChild(button("↑", up, function () {
          if (i === 0) { return; }
          var v = lines(textarea); move(v, i, i - 1);
          write(v, value + " moved to position " + i);
          focusButton(i - 1, up);
        }));
        li.appendChild(button("↓", down, function () {
          var v = lines(textarea);
          if (i >= v.length - 1) { return; }
          move(v, i, i + 1);
          write(v, value + " moved to position " + (i + 2));
          focusButton(i + 1, down);
        }));
        li.appendChild(button("✕", "remove " + value, function () {
          var v = lines(textarea); v.splice(i, 1);
          write(v, value + " removed");
          (picker || entry).focus();
        }));
        li.addEventListener("dragstart", function (e) { dragged = i; e.dataTransfer.setData("text/plain", value); });
        li.addEventListener("dragover", function (e) { e.preventDefault(); });
        li.addEventListener("drop", function (e) {
          e.preventDefault();
          if (dragged === null || dragged === i) { return; }
          var v = lines(textarea); move(v, dragged, i); dragged = null;
          write(v, value + " order changed");
        });
        list.appendChild(li);
      });
      if (picker) {
        // the picker offers the corpus's classes not already in the list
        picker.textContent = "";
        picker.appendChild(option("", "add a class…"));
        vocabulary.filter(function (c) { return values.indexOf(c) < 0; }).forEach(function (c) {
          picker.appendChild(option(c, c));
        });
      }
    }

    function append(value) {
      var v = lines(textarea);
      if (v.indexOf(value) >= 0) { status.textContent = value + " is already listed"; return false; }
      v.push(value);
      write(v, value + " added at position " + v.length);
      return true;
    }

    var adder = el("div", "chip-adder");
    if (vocabulary !== null) {
      picker = el("select", "chip-picker");
      picker.setAttribute("aria-label", "add a class to " + name);
      adder.appendChild(picker);
      adder.appendChild(button("Add", "add the chosen class to " + name, function () {
        if (picker.value) { append(picker.value); picker.focus(); }
      }));
    }
    // a free-text entry: a cue, or a class the picker does not offer (refused unless confirmed)
    var entry = el("input", "chip-entry");
    entry.type = "text";
    entry.setAttribute("aria-label", kind === "cue" ? "new cue for " + name : "type a class for " + name);
    entry.placeholder = kind === "cue" ? "a word or phrase…" : "or type a class…";
    var confirmRow = el("p", "chip-confirm");
    confirmRow.hidden = true;
    var confirmText = el("span", "");
    var pending = null;
    var addAnyway = button("Add anyway", "add the unknown class anyway", function () {
      if (pending === null) { return; }
      append(pending);
      if (confirmBox && !confirmBox.checked) { confirmBox.checked = true; }
      status.textContent = pending + " added although no unit carries it; the confirm box is ticked";
      pending = null; confirmRow.hidden = true; entry.value = ""; entry.focus();
    });
    addAnyway.textContent = "Add anyway";
    var cancel = button("Cancel", "do not add the unknown class", function () {
      pending = null; confirmRow.hidden = true; entry.focus();
    });
    cancel.textContent = "Cancel";
    confirmRow.appendChild(confirmText);
    confirmRow.appendChild(addAnyway);
    confirmRow.appendChild(cancel);

    function addTyped() {
      var value = entry.value.trim();
      if (!value) { return; }
      if (unknown(value)) {
        // refused, not warned: adding needs an explicit second step
        pending = value;
        confirmText.textContent = "No unit in scope carries “" + value + "”: a typo selects nothing. ";
        confirmRow.hidden = false;
        status.textContent = "no unit carries " + value + "; add anyway or cancel";
        addAnyway.focus();
        return;
      }
      if (append(value)) { entry.value = ""; }
      entry.focus();
    }
    onEnter(entry, addTyped);
    var addEntry = button("Add", kind === "cue" ? "add the cue to " + name : "add the typed class to " + name, addTyped);
    addEntry.textContent = "Add";
    adder.appendChild(entry);
    adder.appendChild(addEntry);

    box.appendChild(list);
    box.appendChild(adder);
    box.appendChild(confirmRow);
    box.appendChild(status);
    textarea.parentNode.insertBefore(box, textarea);
    // the textarea stays in the form and can still be edited as text: shown behind a toggle
    var details = el("details", "as-text");
    details.appendChild(el("summary", "", "edit as text"));
    textarea.parentNode.insertBefore(details, textarea);
    details.appendChild(textarea);
    textarea.addEventListener("input", function () { render(lines(textarea)); });
    render(lines(textarea));
  }

  // a checkbox group as chips: the checked ones, each removable, and a picker of the others
  function enhanceSet(field) {
    var name = field.getAttribute("data-chip-set");
    var noun = field.getAttribute("data-noun") || "item";
    var boxes = Array.prototype.slice.call(field.querySelectorAll("input[type=checkbox]"));
    if (!boxes.length) { return; }
    var form = boxes[0].form;
    var group = boxes[0].closest("div[id]") || boxes[0].parentNode.parentNode;
    var editor = el("div", "chip-editor");
    var list = el("ul", "chips chip-list");
    list.setAttribute("aria-label", name + ": the " + noun + "s chosen");
    var picker = el("select", "chip-picker");
    picker.setAttribute("aria-label", "add a " + noun + " to " + name);
    var status = el("p", "visually-hidden");
    status.setAttribute("aria-live", "polite");

    function label(b) { return b.value; }

    function render() {
      list.textContent = "";
      picker.textContent = "";
      picker.appendChild(option("", "add a " + noun + "…"));
      boxes.forEach(function (b) {
        if (b.checked) {
          var li = el("li", "chip editable");
          li.setAttribute("data-value", b.value);
          li.appendChild(el("span", "chip-name", label(b)));
          li.appendChild(button("✕", "remove " + label(b) + " from " + name, function () {
            b.checked = false; render(); changed(form);
            status.textContent = label(b) + " removed from " + name;
            picker.focus();
          }));
          list.appendChild(li);
        } else {
          picker.appendChild(option(b.value, label(b)));
        }
      });
      if (!list.children.length) { list.appendChild(el("li", "empty", "none: the project alone")); }
    }

    var add = button("Add", "add the chosen " + noun + " to " + name, function () {
      var b = boxes.filter(function (x) { return x.value === picker.value; })[0];
      if (!b) { return; }
      b.checked = true; render(); changed(form);
      status.textContent = b.value + " added to " + name;
      picker.focus();
    });
    add.textContent = "Add";
    var adder = el("div", "chip-adder");
    adder.appendChild(picker);
    adder.appendChild(add);
    editor.appendChild(list);
    editor.appendChild(adder);
    editor.appendChild(status);
    group.parentNode.insertBefore(editor, group);
    var details = el("details", "as-text");
    details.appendChild(el("summary", "", "show as checkboxes"));
    group.parentNode.insertBefore(details, group);
    details.appendChild(group);
    boxes.forEach(function (b) { b.addEventListener("change", render); });
    render();
  }

  function enhanceStepper(input) {
    var name = input.getAttribute("data-stepper");
    var form = input.form;
    function step(by) {
      var now = input.value === "" ? Number(input.getAttribute("data-default") || 0) : Number(input.value);
      var min = input.min === "" ? -Infinity : Number(input.min);
      input.value = String(Math.max(min, now + by));
      changed(form);
    }
    var wrap = el("span", "stepper");
    input.parentNode.insertBefore(wrap, input);
    var less = button("−", "decrease " + name, function () { step(-1); });
    var more = button("+", "increase " + name, function () { step(1); });
    wrap.appendChild(less);
    wrap.appendChild(input);
    wrap.appendChild(more);
  }

  // the limits table: a blank row is hidden until "add a limit"; a row's "remove" empties it
  function enhanceLimits(table) {
    var form = table.closest("form");
    var rows = Array.prototype.slice.call(table.querySelectorAll("tbody tr"));
    function metricOf(row) { return row.querySelector("select"); }
    function blank(row) { return !metricOf(row).value && !row.querySelector(".field-error"); }
    var addRow = el("button", "", "Add a limit");
    addRow.type = "button";
    function sync() {
      addRow.hidden = !rows.some(function (r) { return r.hidden; });
    }
    rows.forEach(function (row, i) {
      var cell = el("td", "");
      cell.appendChild(button("Remove", "remove limit " + (i + 1), function () {
        metricOf(row).value = "";
        row.querySelectorAll("input").forEach(function (x) { x.value = ""; });
        row.hidden = true; sync(); changed(form);
        addRow.focus();
      }));
      cell.lastChild.textContent = "Remove";
      row.appendChild(cell);
      if (blank(row)) { row.hidden = true; }
    });
    var head = table.querySelector("thead tr");
    if (head) { head.appendChild(el("th", "", "")); }
    addRow.addEventListener("click", function () {
      var row = rows.filter(function (r) { return r.hidden; })[0];
      if (!row) { return; }
      row.hidden = false; sync();
      metricOf(row).focus();
    });
    table.parentNode.parentNode.insertBefore(addRow, table.parentNode.nextSibling);
    sync();
  }

  document.addEventListener("DOMContentLoaded", function () {
    var source = document.getElementById("corpus-classes");
    var known = source ? JSON.parse(source.textContent) : [];
    document.querySelectorAll("textarea[data-chips]").forEach(function (t) { enhanceList(t, known); });
    document.querySelectorAll("[data-chip-set]").forEach(enhanceSet);
    document.querySelectorAll("input[data-stepper]").forEach(enhanceStepper);
    document.querySelectorAll("table.limits").forEach(enhanceLimits);
  });
})();
