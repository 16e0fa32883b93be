"""The labelling page's static files: one HTML page, its script and its style (no data in any of them).

The script fetches the items as JSON and builds the DOM with ``textContent`` only: no ``innerHTML``, no inline
script or handler (the page's Content-Security-Policy allows neither), so trace content shows as text whatever it
contains.
"""

from __future__ import annotations

from typing import Final

INDEX_HTML: Final = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>otel-toolcall-eval: label judged calls</title>
<link rel="stylesheet" href="/app.css">
<script src="/app.js" defer></script>
</head>
<body data-ready="false">
<header>
<h1>Label judged tool calls</h1>
<p class="keys">keys: <kbd>1</kbd>-<kbd>9</kbd> a label, <kbd>p</kbd> pass (best label), <kbd>f</kbd> fail
(worst label), <kbd>s</kbd> skip. Each label is saved at once.</p>
<p id="progress"></p>
<p id="error" role="alert"></p>
</header>
<main id="item"></main>
</body>
</html>
"""

APP_JS: Final = r""""use strict";
const $ = (id) => document.getElementById(id);
let current = null;
let busy = false;

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function show(state) {
  $("progress").textContent =
    `${state.labelled} labelled, ${state.skipped} skipped, of ${state.total} (rater: ${state.rater})`;
  const main = $("item");
  main.replaceChildren();
  current = state.item;
  document.body.dataset.ready = "true";
  if (!current) {
    main.dataset.index = "";
    main.append(el("p", "Nothing left to label. Thank you.", "done"));
    document.body.dataset.done = "true";
    return;
  }
  document.body.dataset.done = "false";
  main.dataset.index = String(current.index);
  main.append(el("h2", current.question));
  main.append(el("p", current.prompt, "prompt"));
  const blocks = [["tool_call", "The call", current.tool_call], ["data", "What the judge received", current.data]];
  for (const [kind, title, fields] of blocks) {
    const group = el("div", undefined, `fields ${kind}`);
    group.dataset.kind = kind;
    group.append(el("h3", title));
    for (const [name, value] of Object.entries(fields || {})) {
      const section = el("section", undefined, "field");
      section.dataset.field = name;
      section.append(el("h4", name));
      section.append(el("pre", typeof value === "string" ? value : JSON.stringify(value, null, 2)));
      group.append(section);
    }
    main.append(group);
  }
  if ("judge" in current) {
    const why = current.explanation ? ` (${current.explanation})` : "";
    main.append(el("p", `judge: ${current.judge}${why}`, "verdict"));
  }
  const choices = el("div", undefined, "choices");
  current.scale.forEach((s, i) => {
    const button = el("button", `${i + 1}  ${s.label}` + (s.meaning ? `: ${s.meaning}` : ""));
    button.type = "button";
    button.dataset.label = s.label;
    button.addEventListener("click", () => send(s.label));
    choices.append(button);
  });
  const skip = el("button", "s  skip");
  skip.type = "button";
  skip.dataset.label = "skip";
  skip.addEventListener("click", () => send("skip"));
  choices.append(skip);
  main.append(choices);
}

async function load() {
  const response = await fetch("/api/state");
  show(await response.json());
}

async function send(label) {
  if (!current || busy) return;
  busy = true;
  try {
    const response = await fetch("/api/label", {
      method: "POST",
      headers: {"Content-Type": "application/json"},
      body: JSON.stringify({index: current.index, label}),
    });
    const body = await response.json();
    if (!response.ok) {
      $("error").textContent = body.error || "not saved";
      return;
    }
    $("error").textContent = "";
    show(body);
  } catch (e) {
    $("error").textContent = "not saved: the server cannot be reached";
  } finally {
    busy = false;
  }
}

function byScore(best) {
  const sorted = [...current.scale].sort((a, b) => (a.score ?? 0) - (b.score ?? 0));
  return (best ? sorted[sorted.length - 1] : sorted[0]).label;
}

document.addEventListener("keydown", (event) => {
  if (!current || event.ctrlKey || event.metaKey || event.altKey) return;
  const key = event.key.toLowerCase();
  if (key >= "1" && key <= "9" && key.length === 1) {
    const s = current.scale[Number(key) - 1];
    if (s) send(s.label);
  } else if (key === "p") {
    send(byScore(true));
  } else if (key === "f") {
    send(byScore(false));
  } else if (key === "s") {
    send("skip");
  }
});

load();
"""

# Styled for work at a desk (checked at 1400x1000 by tests/integration/test_label_page.py): the label buttons stay
# in view (a bar stuck to the bottom of the window while the call scrolls), long arguments wrap in a monospace
# block with their own scroll, and the call and what the judge received sit side by side on a wide screen.
APP_CSS: Final = """:root { color-scheme: light; --line: #d0d7de; --muted: #57606a; --accent: #0969da; }
body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 84rem; padding: 0 1.5rem; color: #1f2328; }
header { display: flex; flex-wrap: wrap; align-items: baseline; gap: .2rem 1.5rem; padding: .6rem 0;
  border-bottom: 1px solid var(--line); }
header h1 { font-size: 1.15rem; margin: 0; }
header p { margin: 0; color: var(--muted); font-size: .9rem; }
#item h2 { font-size: 1.1rem; margin: .8rem 0 .2rem; }
.prompt { font-weight: 600; margin: .2rem 0 .6rem; }
#item { padding-bottom: 1rem; }
@media (min-width: 70rem) {
  #item { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); column-gap: 1.2rem; }
  #item > h2, #item > .prompt, #item > .verdict, #item > .choices, #item > .done { grid-column: 1 / -1; }
}
.fields h3 { font-size: .95rem; margin: .4rem 0; color: var(--muted); }
.field h4 { font: 600 .85rem ui-monospace, monospace; margin: .5rem 0 .15rem; }
pre { font: 13px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; background: #f6f8fa; border: 1px solid var(--line);
  border-radius: 6px; padding: .5rem .6rem; margin: 0; white-space: pre-wrap; overflow-wrap: anywhere;
  max-height: 16rem; overflow: auto; }
.choices { position: sticky; bottom: 0; display: flex; flex-wrap: wrap; gap: .5rem; padding: .7rem 0;
  background: #fff; border-top: 1px solid var(--line); box-shadow: 0 -6px 12px -10px rgba(0, 0, 0, .3); }
.choices button { font: inherit; padding: .45rem .9rem; border: 1px solid var(--line); border-radius: 6px;
  background: #f6f8fa; cursor: pointer; text-align: left; }
.choices button:hover, .choices button:focus-visible { border-color: var(--accent); outline: none;
  background: #ddf4ff; }
.choices button[data-label="skip"] { margin-left: auto; color: var(--muted); }
.verdict { color: var(--muted); }
#error { color: #b00020; }
kbd { border: 1px solid #999; border-radius: 3px; padding: 0 .3rem; font-size: .85em; }
"""
