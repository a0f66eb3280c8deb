"""A projector's fold form (``registry.FOLD_FORMS``: a row's cells in one ``RowPut``) folds to
what its plain form's ``Put`` per cell folds to, whatever the order of the events, with
duplicates, and with rows read (a view) while folding (ADR 0106)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.tables.memory import InMemoryTableStore
from projections import messages
from projections import names as n
from projections.mutationfold import MutationFold, RowPut
from projections.registry import ALL, FOLD_FORMS
from projections.runner import ProjectionRunner
from projections.tablestore import DeleteColumn, DeleteRow, Put
from tests.history import History

OPS = st.lists(st.tuples(
    st.sampled_from(["deliver", "flag", "label", "move", "delete", "restore", "expunge",
                     "extract", "policy"]),
    st.integers(0, 20)), min_size=1, max_size=30)


def history(ops: list[tuple[str, int]]) -> History:
    h = History()
    h.account("ada@example.org")
    h.create_mailbox("ada@example.org", "Archive")
    for op, pick in ops:
        listed = [m for m in sorted(h.messages, key=lambda m: m.int)
                  if h.messages[m].state in ("active", "expired")]
        if op == "deliver" or not listed:
            h.deliver("ada@example.org", "INBOX", flags=["\\Seen"], labels=["work"],
                      size=100 + pick, inline=pick % 2 == 0)
            continue
        message = listed[pick % len(listed)]
        if op == "flag":
            h.flag(message, ["\\Flagged"], "add" if pick % 2 else "remove")
        elif op == "label":
            h.label(message, add=["home"], remove=["work"])
        elif op == "move":
            h.move(message, "Archive" if pick % 2 else "INBOX")
        elif op == "policy":
            h.set_policy(message, limit=2)
        else:
            getattr(h, op)(message)
    return h


def folded(outputs: list[Any], read_rows: list[bytes]) -> list[Any]:
    fold = MutationFold()
    for i, output in enumerate(outputs):
        if i < len(read_rows):
            fold.read(n.MESSAGES, read_rows[i])  # a view of the row, kept up to date
        fold.extend(output)
    return fold.mutations()


@settings(max_examples=60)
@given(ops=OPS, data=st.data())
def test_the_messages_fold_form_folds_to_the_puts_of_the_plain_projector(
    ops: list[tuple[str, int]], data: st.DataObject
) -> None:
    events = history(ops).events
    events = data.draw(st.permutations(events + data.draw(st.lists(st.sampled_from(events),
                                                                   max_size=5))))
    plain = [messages.project(e, p, lambda t, r: {}) for p, e in events]
    rows = [messages.fold_project(e, p, lambda t, r: {}) for p, e in events]
    assert any(type(m) is RowPut for out in rows for m in out)
    keys = sorted({m.row for out in plain for m in out})
    read_rows = data.draw(st.lists(st.sampled_from(keys), max_size=8)) if keys else []
    assert folded(rows, read_rows) == folded(plain, read_rows)


def test_a_row_put_is_hidden_as_its_puts_would_be() -> None:
    fold = MutationFold()
    fold.extend([DeleteRow("t", b"gone", 5), DeleteColumn("t", b"some", b"f:a", 5),
                 Put("t", b"newer", b"f:a", b"kept", 9)])
    fold.extend([RowPut("t", row, ((b"f:a", b"1"), (b"f:b", b"2")), 5)
                 for row in (b"gone", b"some", b"newer", b"fresh")])
    assert fold.mutations() == [
        Put("t", b"fresh", b"f:a", b"1", 5), Put("t", b"fresh", b"f:b", b"2", 5),
        DeleteRow("t", b"gone", 5),
        Put("t", b"newer", b"f:a", b"kept", 9), Put("t", b"newer", b"f:b", b"2", 5),
        DeleteColumn("t", b"some", b"f:a", 5), Put("t", b"some", b"f:b", b"2", 5),
    ]
    assert fold.cells == 5


def test_only_messages_has_a_fold_form_and_a_projection_given_another_projector_loses_it(
) -> None:
    """A fold form belongs to its projector: a ``Projection`` whose ``project`` was replaced
    (a failing one, in the stream tests) is folded through the one it was given."""
    assert {messages.project: messages.fold_project} == FOLD_FORMS
    seen: list[int] = []

    def spy(event: Any, position: int, read: Any) -> list[Any]:
        seen.append(position)
        return messages.project(event, position, read)

    h = history([("deliver", 0), ("flag", 0)])
    spied = tuple(replace(p, project=spy) if p.name == "messages" else p for p in ALL)
    runner = ProjectionRunner(InMemoryTableStore(), spied)
    runner.create_tables()
    runner.apply_events(h.events, fold=True)
    assert seen == [p for p, e in h.events if type(e) in messages.HANDLED] != []
