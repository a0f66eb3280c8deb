"""THREAD (RFC 5256 section 3): ORDEREDSUBJECT and REFERENCES over the selected
messages' headers."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from adapters.imap.sort import _REFWD, base_subject, decoded

_MSGID = re.compile(rb"<([^<>]+)>")


@dataclass
class Node:
    """A container of the REFERENCES algorithm: a message (its number) or a dummy."""

    number: int | None = None
    date: tuple[float, int] = (0.0, 0)  # sent date, then sequence number
    subject: str = ""
    reply: bool = False
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)

    def ancestors(self) -> set[int]:
        seen: set[int] = set()
        node: Node | None = self
        while node is not None and id(node) not in seen:
            seen.add(id(node))
            node = node.parent
        return seen

    def first_date(self) -> tuple[float, int]:
        if self.number is not None or not self.children:
            return self.date
        return min(c.first_date() for c in self.children)


@dataclass(frozen=True)
class Message:
    number: int             # the sequence number or UID answered
    date: tuple[float, int]  # sent date (internal date when none), sequence number
    subject: bytes | None
    message_id: bytes | None
    references: bytes | None
    in_reply_to: bytes | None


def _is_reply(subject: bytes | None) -> bool:
    text = decoded(subject).strip()
    while True:
        m = re.match(r"^\[[^\[\]]*\]\s*", text)
        if m and text[m.end():]:
            text = text[m.end():]
            continue
        break
    return bool(_REFWD.match(text)) or text.lower().startswith("[fwd:") or bool(
        re.search(r"\(fwd\)\s*$", text, re.I))


def ordered_subject(messages: list[Message]) -> str:
    ordered = sorted(messages, key=lambda m: (base_subject(m.subject), m.date))
    threads: list[list[Message]] = []
    for m in ordered:
        if threads and base_subject(threads[-1][0].subject) == base_subject(m.subject):
            threads[-1].append(m)
        else:
            threads.append([m])
    threads.sort(key=lambda t: t[0].date)
    out = []
    for t in threads:
        root, rest = t[0], t[1:]
        if len(rest) == 1:
            out.append(f"({root.number} {rest[0].number})")
        elif rest:
            out.append(f"({root.number} " + "".join(f"({m.number})" for m in rest) + ")")
        else:
            out.append(f"({root.number})")
    return "".join(out)


def _ids(value: bytes | None) -> list[bytes]:
    return list(_MSGID.findall(value or b""))


def references(messages: list[Message]) -> str:
    table: dict[bytes, Node] = {}
    unique = 0

    def container(msgid: bytes) -> Node:
        node = table.get(msgid)
        if node is None:
            node = table[msgid] = Node()
        return node

    def link(parent: Node, child: Node) -> None:
        if child.parent is parent or id(child) in parent.ancestors():
            return
        if child.parent is not None:
            child.parent.children.remove(child)
        child.parent = parent
        parent.children.append(child)

    for m in messages:  # (1)
        ids = _MSGID.findall(m.message_id or b"")
        msgid = ids[0] if ids else None
        if msgid is None or (msgid in table and table[msgid].number is not None):
            unique += 1
            msgid = b"\0unique-%d" % unique
        node = container(msgid)
        node.number, node.date = m.number, m.date
        node.subject, node.reply = base_subject(m.subject), _is_reply(m.subject)
        refs = _ids(m.references) or _ids(m.in_reply_to)[:1]
        refs = [r for r in refs if r != msgid]
        for a, b in zip(refs, refs[1:], strict=False):
            parent, child = container(a), container(b)
            if child.parent is None:
                link(parent, child)
        if node.parent is not None:  # (1C) the last reference decides, even against an
            node.parent.children.remove(node)  # earlier (truncated) References' link
            node.parent = None
        if refs:
            link(container(refs[-1]), node)
    roots = [n for n in table.values() if n.parent is None]  # (2)
    roots = _prune(roots, top=True)  # (3)
    for r in roots:
        r.parent = None
    _sort(roots)  # (4)
    roots = _group(roots)  # (5)
    _sort(roots)  # (6)
    return "".join(f"({_render(r)})" for r in roots)


def _prune(nodes: list[Node], *, top: bool) -> list[Node]:
    out: list[Node] = []
    for node in nodes:
        node.children = _prune(node.children, top=False)
        for c in node.children:
            c.parent = node
        if node.number is None:
            if not node.children:
                continue
            if not top or len(node.children) == 1:
                out.extend(node.children)
                continue
        out.append(node)
    return out


def _sort(nodes: list[Node]) -> None:
    for n in nodes:
        _sort(n.children)
    nodes.sort(key=lambda n: n.first_date())


def _subject_of(node: Node) -> tuple[str, bool]:
    if node.number is not None:
        return node.subject, node.reply
    first = min(node.children, key=lambda n: n.first_date())
    return first.subject, first.reply


def _group(roots: list[Node]) -> list[Node]:
    """Step 5: threads whose roots share a base subject are put together."""
    table: dict[str, Node] = {}
    for r in roots:  # (5A): a dummy wins over a message, a message over a reply
        subject, reply = _subject_of(r)
        if not subject:
            continue
        old = table.get(subject)
        if old is None or (old.number is not None and (
                r.number is None or (_subject_of(old)[1] and not reply))):
            table[subject] = r
    result = list(roots)
    for r in roots:  # (5B)
        subject, reply = _subject_of(r)
        entry = table.get(subject) if subject else None
        if entry is None or entry is r:
            continue
        result.remove(r)
        if entry.number is None:
            moved = r.children if r.number is None else [r]
            entry.children.extend(moved)
            for c in moved:
                c.parent = entry
        elif reply and not _subject_of(entry)[1]:
            entry.children.append(r)
            r.parent = entry
        else:
            dummy = Node(children=[entry, r])
            entry.parent = r.parent = dummy
            result[result.index(entry)] = dummy
            table[subject] = dummy
    return result


def _render(node: Node) -> str:
    head = str(node.number) if node.number is not None else ""
    kids = node.children
    if not kids:
        return head
    if len(kids) == 1 and node.number is not None:
        return f"{head} {_render(kids[0])}"
    inner = "".join(f"({_render(c)})" for c in kids)
    return f"{head} {inner}" if head else inner

