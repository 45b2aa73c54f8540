/* rfetch web UI: confirmations, selections and the dashboard's live chart.
   Hand-written, no dependency, no build step. Pages work without it (minus the chart). */
(function () {
  "use strict";

  // -- confirmations: a submit button with data-confirm asks first ------------------------
  document.addEventListener("submit", function (event) {
    var button = event.submitter;
    var message = button && button.getAttribute("data-confirm");
    if (message && !window.confirm(message)) {
      event.preventDefault();
    }
  });

  // -- selections: "select all" boxes and buttons that need a selection -------------------
  function refreshSelection(form) {
    var boxes = form.querySelectorAll("input[type=checkbox]:not([data-select-all])");
    var count = 0;
    boxes.forEach(function (box) { if (box.checked) { count += 1; } });
    form.querySelectorAll("[data-needs-selection]").forEach(function (b) { b.disabled = count === 0; });
    var label = form.querySelector("[data-selection-count]");
    if (label) { label.textContent = count + " selected"; }
    var all = form.querySelector("[data-select-all]");
    if (all) {
      all.checked = count > 0 && count === boxes.length;
      all.indeterminate = count > 0 && count < boxes.length;
    }
  }

  document.querySelectorAll("form").forEach(function (form) {
    if (!form.querySelector("[data-needs-selection], [data-select-all]")) { return; }
    form.addEventListener("change", function (event) {
      var target = event.target;
      var name = target.getAttribute && target.getAttribute("data-select-all");
      if (name) {
        form.querySelectorAll("input[name='" + name + "']").forEach(function (box) {
          box.checked = target.checked;
        });
      }
      refreshSelection(form);
    });
    refreshSelection(form);
  });

  // -- selects that apply at once ---------------------------------------------------------
  document.querySelectorAll("select[data-autosubmit]").forEach(function (select) {
    select.addEventListener("change", function () {
      var offset = select.form.querySelector("input[name=offset]");
      if (offset) { offset.value = "0"; }
      select.form.submit();
    });
  });

  // -- live chart -------------------------------------------------------------------------
  var canvas = document.getElementById("live-chart");
  if (!canvas || !canvas.getContext) { return; }

  var source = canvas.getAttribute("data-source");
  var interval = parseFloat(canvas.getAttribute("data-interval")) || 5;
  var maxPoints = 60;
  var points = [];       // {t, processed, failed}: rates per second
  var last = seed();     // previous sample: at first, the totals the page was rendered with
  var timer = null;
  var paused = false;
  var status = document.getElementById("live-status");
  var intervalSelect = document.getElementById("live-interval");
  var toggle = document.getElementById("live-toggle");
  var style = getComputedStyle(document.documentElement);
  var colors = {
    processed: style.getPropertyValue("--processed").trim() || "#2f6fde",
    failed: style.getPropertyValue("--failed").trim() || "#d83a3a",
    grid: style.getPropertyValue("--border").trim() || "#e3e7ee",
    text: style.getPropertyValue("--muted").trim() || "#667085"
  };
  var numberFormat = new Intl.NumberFormat();

  // The page carries the totals it was rendered with, so the first poll (at once) already
  // gives a rate to draw, instead of "Waiting for data…" for a whole poll interval.
  function seed() {
    try {
      var value = JSON.parse(canvas.getAttribute("data-seed") || "null");
      return value && typeof value.time === "number" ? value : null;
    } catch (e) { return null; }
  }

  function setStatus(text) { if (status) { status.textContent = text; } }

  function niceCeiling(value) {
    if (value <= 0) { return 1; }
    var exponent = Math.pow(10, Math.floor(Math.log10(value)));
    var steps = [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10];
    for (var i = 0; i < steps.length; i += 1) {
      if (steps[i] * exponent >= value) { return steps[i] * exponent; }
    }
    return 10 * exponent;
  }

  function formatRate(value) {
    if (value >= 100) { return Math.round(value).toLocaleString(); }
    if (value >= 10) { return value.toFixed(1); }
    return value.toFixed(2);
  }

  function clock(t) {
    var d = new Date(t * 1000);
    return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  }

  function draw() {
    var ratio = window.devicePixelRatio || 1;
    var width = canvas.clientWidth;
    var height = canvas.clientHeight;
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    var ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);

    var left = 52, right = 10, top = 10, bottom = 24;
    var plotW = width - left - right;
    var plotH = height - top - bottom;
    var peak = 0;
    points.forEach(function (p) { peak = Math.max(peak, p.processed, p.failed); });
    var scale = niceCeiling(peak);

    ctx.font = "11px system-ui, sans-serif";
    ctx.fillStyle = colors.text;
    ctx.strokeStyle = colors.grid;
    ctx.lineWidth = 1;
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (var i = 0; i <= 4; i += 1) {
      var y = Math.round(top + plotH - (plotH * i) / 4) + 0.5;
      ctx.beginPath();
      ctx.moveTo(left, y);
      ctx.lineTo(width - right, y);
      ctx.stroke();
      ctx.fillText(formatRate((scale * i) / 4) + "/s", left - 8, y);
    }

    if (points.length < 2) {
      ctx.textAlign = "center";
      ctx.fillText(points.length ? "Collecting…" : "Waiting for data…", left + plotW / 2, top + plotH / 2);
      return;
    }

    // The samples so far span the whole width (the first interval too, on a cold load).
    var step = plotW / (points.length - 1);
    function x(index) { return left + index * step; }
    function yOf(value) { return top + plotH - (plotH * value) / scale; }

    function line(key, color, fill) {
      ctx.beginPath();
      points.forEach(function (p, index) {
        if (index === 0) { ctx.moveTo(x(index), yOf(p[key])); } else { ctx.lineTo(x(index), yOf(p[key])); }
      });
      ctx.strokeStyle = color;
      ctx.lineWidth = 2;
      ctx.lineJoin = "round";
      ctx.stroke();
      if (fill) {
        ctx.lineTo(x(points.length - 1), top + plotH);
        ctx.lineTo(x(0), top + plotH);
        ctx.closePath();
        ctx.globalAlpha = 0.12;
        ctx.fillStyle = color;
        ctx.fill();
        ctx.globalAlpha = 1;
      }
    }
    line("processed", colors.processed, true);
    line("failed", colors.failed, false);

    ctx.fillStyle = colors.text;
    ctx.textBaseline = "alphabetic";
    var lastX = x(points.length - 1);
    var lastLabel = clock(points[points.length - 1].t);
    ctx.textAlign = "right";
    ctx.fillText(lastLabel, lastX, height - 6);
    // The oldest time goes under the left end of the line unless it would run into the
    // newest one (the first minute, or a narrow screen): then only the newest is shown.
    var firstLabel = clock(points[0].t);
    var gap = 12;
    if (x(0) + ctx.measureText(firstLabel).width + gap <= lastX - ctx.measureText(lastLabel).width) {
      ctx.textAlign = "left";
      ctx.fillText(firstLabel, x(0), height - 6);
    }
  }

  function updateNumbers(stats) {
    document.querySelectorAll("[data-stat]").forEach(function (el) {
      var value = stats[el.getAttribute("data-stat")];
      if (typeof value === "number") { el.textContent = numberFormat.format(value); }
    });
  }

  function updateLegend(point) {
    ["processed", "failed"].forEach(function (key) {
      var el = document.querySelector("[data-live='" + key + "']");
      if (el) { el.textContent = formatRate(point[key]); }
    });
  }

  function sample() {
    var request = new XMLHttpRequest();
    request.open("GET", source, true);
    request.setRequestHeader("Accept", "application/json");
    request.onload = function () {
      if (request.status !== 200) {
        setStatus("Could not read the stats (HTTP " + request.status + "); retrying.");
        return;
      }
      var stats;
      try { stats = JSON.parse(request.responseText); } catch (e) { setStatus("Bad answer from the server."); return; }
      updateNumbers(stats);
      if (last !== null) {
        var seconds = Math.max(stats.time - last.time, 0.001);
        var point = {
          t: stats.time,
          processed: Math.max(stats.processed - last.processed, 0) / seconds,
          failed: Math.max(stats.failed - last.failed, 0) / seconds
        };
        // The first rate holds over the whole first interval: drawn as a level line.
        if (points.length === 0) { points.push({ t: last.time, processed: point.processed, failed: point.failed }); }
        points.push(point);
        if (points.length > maxPoints) { points.shift(); }
        updateLegend(point);
      }
      last = stats;
      setStatus("Updated " + clock(stats.time) + " · every " + interval + " s");
      draw();
    };
    request.onerror = function () { setStatus("Cannot reach the server; retrying."); };
    request.send();
  }

  function schedule() {
    if (timer !== null) { window.clearInterval(timer); }
    timer = paused ? null : window.setInterval(sample, interval * 1000);
  }

  if (intervalSelect) {
    intervalSelect.addEventListener("change", function () {
      interval = parseFloat(intervalSelect.value) || 5;
      schedule();
      sample();
    });
  }
  if (toggle) {
    toggle.addEventListener("click", function () {
      paused = !paused;
      toggle.textContent = paused ? "Resume" : "Pause";
      toggle.setAttribute("aria-pressed", paused ? "true" : "false");
      if (paused) { setStatus("Paused."); } else { sample(); }
      schedule();
    });
  }
  window.addEventListener("resize", draw);
  draw();
  sample();
  schedule();
})();
