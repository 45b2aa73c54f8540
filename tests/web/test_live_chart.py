"""The dashboard's live chart (rfetch.js) run in Node with a recording canvas: its time
labels never overlap, from the first two samples on and at phone width."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
from pathlib import Path

import pytest

import rfetch.web

SCRIPT = Path(rfetch.web.__file__).parent / "static" / "rfetch.js"
NODE = shutil.which("node") or shutil.which("nodejs")

HARNESS = r"""
const fs = require("fs");
const vm = require("vm");
const [scriptPath, width, samples] = process.argv.slice(-3);
const calls = [];
const ctx = {
  setTransform() {}, clearRect() {}, beginPath() {}, moveTo() {}, lineTo() {}, stroke() {},
  fill() {}, closePath() {},
  fillText(text, x, y) { calls.push({ text, x, y, align: this.textAlign }); },
  measureText(text) { return { width: 6.5 * String(text).length }; },
};
const canvas = {
  clientWidth: Number(width), clientHeight: 220,
  getAttribute(name) {
    return { "data-source": "/stats.json", "data-interval": "5" }[name] || null;
  },
  getContext() { return ctx; },
};
let tick = null;
const pending = [];
const sandbox = {
  document: {
    addEventListener() {}, querySelectorAll() { return []; }, querySelector() { return null; },
    getElementById(id) { return id === "live-chart" ? canvas : null; }, documentElement: {},
  },
  window: {
    devicePixelRatio: 1, addEventListener() {},
    setInterval(fn) { tick = fn; return 1; }, clearInterval() {},
  },
  getComputedStyle() { return { getPropertyValue() { return ""; } }; },
  XMLHttpRequest: function () {
    this.open = () => {}; this.setRequestHeader = () => {}; this.send = () => pending.push(this);
  },
  Intl, Math, Date, JSON, parseFloat, console,
};
vm.runInNewContext(fs.readFileSync(scriptPath, "utf8"), sandbox);
for (let i = 0; i < Number(samples); i += 1) {
  if (i > 0) { tick(); }
  const request = pending.shift();
  request.status = 200;
  request.responseText = JSON.stringify({ time: 1700000000 + 5 * i, processed: 10 * i, failed: i });
  calls.length = 0;
  request.onload();
}
console.log(JSON.stringify(calls.filter((c) => c.y === 220 - 6)));
"""


def time_labels(width: int, samples: int) -> list[dict[str, object]]:
    out = subprocess.run([str(NODE), "-e", HARNESS, str(SCRIPT), str(width), str(samples)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr[-2000:]
    labels: list[dict[str, object]] = json.loads(out.stdout)
    return labels


def extent(label: dict[str, object]) -> tuple[float, float]:
    x = float(label["x"])  # type: ignore[arg-type]
    width = 6.5 * len(str(label["text"]))
    return (x - width, x) if label["align"] == "right" else (x, x + width)


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize("width", [320, 375, 700, 1200])
@pytest.mark.parametrize("samples", [3, 4, 10, 40, 61])
def test_time_labels_never_overlap(width: int, samples: int) -> None:
    labels = time_labels(width, samples)
    assert labels, "the newest time is always shown"
    spans = sorted(extent(label) for label in labels)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end <= start, labels
    for left, right in spans:
        assert left >= 0 and right <= width, labels


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_both_ends_are_labelled_once_there_is_room() -> None:
    assert len(time_labels(1200, 61)) == 2
