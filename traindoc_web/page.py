"""What the web chat's page is made of besides its components: the style, the script, the example prompts and
the sources panel.

The script makes each answer's ``[n]`` markers buttons that open the cited section, rendered, over the page (at
any width), keeps the view at the top of a new answer, and nothing else: no request leaves the page's host. The
sources panel holds every answer's sources, the latest open; a section is rendered from its Markdown with raw
HTML and links left inert, its secrets masked, invisible characters (a right-to-left override) shown as ``<U+202E>``.
"""

from __future__ import annotations

import html
import socket
from functools import cache
from pathlib import Path
from typing import Any

from advice.review import with_notes
from common.secrets import mask
from common.textsafe import inert_markdown, printable

ASSETS = Path(__file__).resolve().parent / "assets"
EXAMPLE_LOG = ASSETS / "example-oom-2-ranks.log"  # real torchrun output of a 2-rank job that ran out of GPU memory
TITLE_CHARS = 70
NEW_BROWSER = {"browser": "", "conversation": ""}  # the ids a page holds until traindoc_web/chat.py gives it its own

CSS = """
.traindoc-sources details { margin: 4px 0; }
.traindoc-sources .traindoc-turn > summary { font-weight: 600; cursor: pointer; }
.traindoc-sources .traindoc-turn { border-top: 1px solid var(--border-color-primary); padding-top: 4px; }
.traindoc-source { cursor: pointer; }
.traindoc-section { font-size: 0.9em; padding: 4px 8px; border-left: 3px solid var(--border-color-accent, #888);
                    overflow-x: auto; max-width: 100%; }
.traindoc-section pre { white-space: pre; overflow-x: auto; }
.traindoc-cite { cursor: pointer; color: var(--link-text-color, #2563eb); text-decoration: underline dotted;
                 background: none; border: 0; padding: 0; font: inherit; }
#traindoc-cite-pop { position: fixed; z-index: 1000; box-sizing: border-box; top: 8vh; left: 50%; transform: translateX(-50%);
                     width: min(760px, 94vw); max-height: 80vh; overflow: auto; padding: 12px 16px;
                     background: var(--background-fill-primary, #fff); color: var(--body-text-color, #111);
                     border: 1px solid var(--border-color-primary, #ccc); border-radius: 8px;
                     box-shadow: 0 8px 32px rgba(0, 0, 0, 0.35); }
#traindoc-cite-pop header { display: flex; gap: 8px; justify-content: space-between; align-items: start;
                            font-weight: 600; margin-bottom: 6px; }
#traindoc-cite-pop button { font-size: 1.2em; background: none; border: 0; cursor: pointer; color: inherit; }
#chat .message { scroll-margin-top: 36px; }
#chat img[src^="data:image/svg+xml"] { width: 100% !important; max-width: 680px !important; height: auto !important;
                                       max-height: none !important; }
.traindoc-probes { display: block; overflow-x: auto; max-width: 100%; }
.traindoc-probes td, .traindoc-probes th { padding: 2px 8px; text-align: left; vertical-align: top;
                                           overflow-wrap: anywhere; }
@media (max-width: 720px) {
  #question-row { flex-direction: column !important; flex-wrap: nowrap !important; }
  #question-row > * { width: 100% !important; min-width: 100% !important; flex: none !important; }
  #chat { height: 58vh !important; }
  #chat .bot-row:has(img[src^="data:image/svg+xml"]) { max-width: 100% !important; }  /* the job's timeline, widest */
}
"""

# Runs in the page (Gradio's `head`): [n] markers become buttons; a click shows that answer's cited section.
SCRIPT = """
<script>
(() => {
  const MARK = /\\[(\\d{1,2})\\]/g;
  const SKIP = 'code, pre, a, button, .traindoc-cite, .thought-group, textarea';
  function turnOf(row) {
    let turn = 0;
    for (const r of document.querySelectorAll('#chat .user-row, #chat .bot-row')) {
      if (r.classList.contains('user-row')) turn++;
      if (r === row) return turn;
    }
    return turn;
  }
  function linkify(root) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    const found = [];
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (MARK.test(node.nodeValue) && !node.parentElement.closest(SKIP)) found.push(node);
      MARK.lastIndex = 0;
    }
    for (const node of found) {
      const text = node.nodeValue, frag = document.createDocumentFragment();
      let last = 0;
      for (const m of text.matchAll(MARK)) {
        frag.append(text.slice(last, m.index));
        const b = document.createElement('button');
        b.type = 'button'; b.className = 'traindoc-cite'; b.dataset.n = m[1]; b.textContent = m[0];
        b.title = 'show source ' + m[1];
        frag.append(b);
        last = m.index + m[0].length;
      }
      frag.append(text.slice(last));
      node.replaceWith(frag);
    }
  }
  function scan() {
    for (const content of document.querySelectorAll('#chat .bot-row .message-content')) linkify(content);
    for (const arrow of document.querySelectorAll('#chat .arrow button[aria-label=""], #chat .arrow button:not([aria-label])')) {
      arrow.setAttribute('aria-label', 'Show or hide this step');  // Gradio leaves the step toggle unnamed
    }
  }
  function closePop() { document.getElementById('traindoc-cite-pop')?.remove(); }
  function showSource(turn, n) {
    const group = document.querySelector(`#sources .traindoc-turn[data-turn="${turn}"]`);
    const title = group && group.querySelector(`.traindoc-source[data-n="${n}"]`);
    const item = title && title.parentElement;
    closePop();
    const pop = document.createElement('div');
    pop.id = 'traindoc-cite-pop'; pop.setAttribute('role', 'dialog');
    const head = document.createElement('header');
    const label = document.createElement('span');
    label.textContent = item ? title.textContent : `[${n}]: no such source for this answer`;
    const close = document.createElement('button');
    close.type = 'button'; close.textContent = '×'; close.setAttribute('aria-label', 'Close'); close.onclick = closePop;
    head.append(label, close);
    pop.append(head);
    if (item) {
      group.open = true; item.open = true;
      const body = item.querySelector('.traindoc-section').cloneNode(true);
      pop.append(body);
    }
    document.body.append(pop);
  }
  document.addEventListener('click', (event) => {
    const cite = event.target.closest && event.target.closest('.traindoc-cite');
    if (cite) {
      event.preventDefault(); event.stopPropagation();
      showSource(turnOf(cite.closest('.bot-row')), cite.dataset.n);
    } else if (!event.target.closest || !event.target.closest('#traindoc-cite-pop')) {
      closePop();
    }
  }, true);
  document.addEventListener('keydown', (event) => { if (event.key === 'Escape') closePop(); });
  new MutationObserver(scan).observe(document.documentElement, {childList: true, subtree: true, characterData: true});
})();
</script>
"""

# After an answer: its first line at the top of the view (a long answer is read from its start, not its end).
SCROLL_TO_ANSWER = """
() => {
 const place = () => {  // again once the chat has laid the answer out (its markdown and code render after the update)
  const rows = document.querySelectorAll('#chat .bot-row');
  const row = rows[rows.length - 1];
  if (!row) return;
  const said = [...row.querySelectorAll('.message')].filter(m => !m.querySelector('.thought-group'));
  const message = said[0] || row;  // the answer leads its turn; the probes that made it follow, folded
  const LABEL = 36;  // the chat's own label sits over the top of its box
  for (let box = message.parentElement; box && box !== document.body; box = box.parentElement) {
    if (/(auto|scroll)/.test(getComputedStyle(box).overflowY) && box.scrollHeight > box.clientHeight) {
      box.scrollTop += message.getBoundingClientRect().top - box.getBoundingClientRect().top - LABEL;
    }
  }
  const chatbox = document.getElementById('chat');  // a narrow page: the whole chat box in view, not the Ask button
  const box = chatbox && chatbox.getBoundingClientRect();
  if (box && (box.top < 0 || box.bottom > innerHeight)) window.scrollBy(0, box.top - 4);
  const top = message.getBoundingClientRect().top;
  if (top < 0 || top > innerHeight / 2) window.scrollBy(0, top - LABEL - 8);
 };
 place();
 setTimeout(place, 250);
 setTimeout(place, 900);
}
"""


def examples() -> list[dict[str, Any]]:
    """The empty page's example prompts: a pasted error, a log upload, a hang."""
    return [
        {"display_text": "Paste an error: CUDA error: no kernel image (sm_120)",
         "text": "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
                 "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation."},
        {"display_text": "Upload a log: why did this 2-GPU job crash?", "text": "why did my training job crash?",
         "files": [str(EXAMPLE_LOG)]},
        {"display_text": "A hang: NCCL training stuck at the first allreduce",
         "text": "My 8-GPU training hangs at the first allreduce and never times out. What should I check?"},
    ]


def server_host() -> str:
    """The host the probe panel describes: the server's, not the reader's."""
    return socket.gethostname() or "the server"


@cache
def _markdown() -> Any:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


def rendered(markdown: str) -> str:
    """A section as HTML: secrets masked, links, images and raw HTML from the text left as text."""
    return str(_markdown().render(inert_markdown(mask(markdown))))


def html_text(text: str) -> str:
    """Plain text for the page's HTML: secrets masked, invisible characters shown, HTML escaped."""
    return html.escape(printable(mask(text)))


def citation_items(answer: dict[str, Any]) -> str:
    """One answer's sources (``answer`` as in ``Answer.to_json()`` plus ``texts``: chunk id -> section text)."""
    items = []
    for c in answer["citations"]:
        text = answer.get("texts", {}).get(c["chunk_id"], "")
        cited_as = (c.get("named") or c["section"]) + (f" [{c['lang']}]" if c.get("lang") else "")
        items.append(
            f"<details><summary class='traindoc-source' data-n='{int(c['n'])}' "
            f"data-source='{html_text(Path(c['source']).name)}'>[{int(c['n'])}] "
            f"{html_text(cited_as)}</summary>"
            f"<div class='traindoc-section'>{rendered(with_notes(text, tuple(c.get('notes') or ())))}</div></details>")
    return "".join(items) or "<em>No sources for this answer.</em>"


def sources_html(answers: list[dict[str, Any]]) -> str:
    """Every answer's sources, the latest first and open; each group is found by its turn (``data-turn``)."""
    if not answers:
        return ""
    groups = []
    for position, entry in enumerate(reversed(answers)):
        answer, turn = entry["answer"], int(entry.get("turn", 0))
        question = " ".join(mask(answer["question"]).split())
        if len(question) > TITLE_CHARS:
            question = question[:TITLE_CHARS].rstrip() + "…"
        items = citation_items({**answer, "texts": entry.get("texts", {})})
        groups.append(f"<details class='traindoc-turn' data-turn='{turn}'{' open' if position == 0 else ''}>"
                      f"<summary>Answer {turn}: {html.escape(printable(question))}</summary>{items}</details>")
    return "<div class='traindoc-sources'><strong>Sources</strong>" + "".join(groups) + "</div>"
