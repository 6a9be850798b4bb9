"""The Findings section: a Markdown document (docs/findings.md) rendered with
python3-markdown. Its headings move one level down (its title becomes the
section's heading), its relative links are rewritten to resolve from the
report's directory, and the images it shows from disk are embedded."""

import base64
import mimetypes
import os
import re
import sys
from urllib.parse import quote, unquote, urlsplit

from .results import ReportError

try:
    import markdown
    from markdown.extensions import Extension
    from markdown.preprocessors import Preprocessor
    from markdown.treeprocessors import Treeprocessor
except ImportError:
    markdown = None
    Extension = Preprocessor = Treeprocessor = object

SECTION_ID = "findings"
ANCHOR_PREFIX = "findings-"
HEADINGS = {f"h{n}" for n in range(1, 7)}
LIST_START = re.compile(r"^( *)(?:[-*+]|1[.)])[ \t]+\S")
LIST_ITEM = re.compile(r"^ *(?:[-*+]|\d+[.)])[ \t]")


def _indent(line):
    return len(line) - len(line.lstrip(" "))


def _github_slug(text):
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def _is_external(parts):
    return bool(parts.scheme or parts.netloc or parts.path.startswith("/"))


class _ListsAfterParagraphs(Preprocessor):
    """A blank line before a list item right under a paragraph line: GitHub
    starts a list (or the next item) there, python-markdown only after a
    blank line, unless the paragraph is the item's own first lines."""

    def run(self, lines):
        out, block = [], ""  # block: the first line of the block being read
        for line in lines:
            prev = out[-1] if out else ""
            if not prev.strip():
                block = line
            start = LIST_START.match(line)
            if start and prev.strip() and not LIST_ITEM.match(prev) and (
                    len(start.group(1)) >= _indent(prev) or not LIST_ITEM.match(block)):
                out.append("")
                block = line
            out.append(line)
        return out


class _Relocate(Treeprocessor):
    """Headings one level down with GitHub's anchors (prefixed), links made
    relative to the report's directory, images from disk embedded."""

    def __init__(self, md, doc_path, out_dir):
        super().__init__(md)
        self.doc_path = os.path.abspath(doc_path)
        self.doc_dir = os.path.dirname(self.doc_path)
        self.out_dir = os.path.abspath(out_dir)
        self.anchors = {}  # GitHub's anchor of each heading -> its id here
        self.seen = {}

    def run(self, root):
        self._headings(root)
        for a in root.iter("a"):
            if a.get("href") is not None:
                a.set("href", self._link(a.get("href")))
        for img in root.iter("img"):
            img.set("src", self._image(img.get("src", "")))

    def _headings(self, root):
        headings = [el for el in root.iter() if el.tag in HEADINGS]
        title = headings[0] if headings and headings[0].tag == "h1" else None
        for h in headings:
            base = _github_slug("".join(h.itertext()))
            n = self.seen[base] = self.seen.get(base, -1) + 1
            slug = f"{base}-{n}" if n else base
            self.anchors[slug] = SECTION_ID if h is title else ANCHOR_PREFIX + slug
            h.set("id", self.anchors[slug])
            h.tag = f"h{min(int(h.tag[1]) + 1, 6)}"
        if title is None:
            heading = root.makeelement("h2", {"id": SECTION_ID})
            heading.text = "Findings"
            root.insert(0, heading)

    def _link(self, url):
        parts = urlsplit(url)
        if _is_external(parts):
            return url
        target = os.path.normpath(os.path.join(self.doc_dir, unquote(parts.path)))
        if not parts.path or target == self.doc_path:
            return "#" + self.anchors.get(parts.fragment, SECTION_ID)
        rel = os.path.relpath(target, self.out_dir).replace(os.sep, "/") + ("/" if parts.path.endswith("/") else "")
        query = f"?{parts.query}" if parts.query else ""
        return quote(rel) + query + (f"#{parts.fragment}" if parts.fragment else "")

    def _image(self, url):
        parts = urlsplit(url)
        path = os.path.join(self.doc_dir, unquote(parts.path))
        kind = mimetypes.guess_type(path)[0] or ""
        if _is_external(parts) or not kind.startswith("image/") or not os.path.isfile(path):
            return self._link(url)
        with open(path, "rb") as f:
            return f"data:{kind};base64,{base64.b64encode(f.read()).decode('ascii')}"


class _FindingsExtension(Extension):
    def __init__(self, doc_path, out_dir):
        super().__init__()
        self.doc_path, self.out_dir = doc_path, out_dir

    def extendMarkdown(self, md):
        md.preprocessors.register(_ListsAfterParagraphs(md), "findings_lists", 22)  # after fenced code
        md.treeprocessors.register(_Relocate(md, self.doc_path, self.out_dir), "findings_relocate", -1)


def render(doc_path, out_dir):
    """The section's HTML from the Markdown file doc_path, for a report written into out_dir."""
    if markdown is None:
        raise ReportError(f"the Findings section needs python3-markdown, which {sys.executable} lacks "
                          "(Debian: apt-get install python3-markdown); or give --no-findings")
    with open(doc_path, encoding="utf-8") as f:
        text = f.read()
    # tab_length 2: lists nested by two spaces, as GitHub reads them
    md = markdown.Markdown(extensions=["tables", "fenced_code", _FindingsExtension(doc_path, out_dir)], tab_length=2)
    return f"<div class='findings'>\n{md.convert(text)}\n</div>\n"


def link(doc_path, out_dir):
    """A short Findings section that links to the document instead of inlining it."""
    rel = os.path.relpath(os.path.abspath(doc_path), os.path.abspath(out_dir)).replace(os.sep, "/")
    return (f"<h2 id='{SECTION_ID}'>Findings</h2>\n<p>The project's findings, measured on GPUs: "
            f"<a href='{quote(rel)}'>{os.path.basename(doc_path)}</a> (a report of sim runs links to them rather "
            "than repeating them).</p>\n")
