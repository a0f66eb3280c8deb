"""``letterlog view list`` and ``letterlog view drop NAME``: the saved views of time travel
(``rebuild --until-position P --view NAME``)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from adapters.cli.common import group, human_size, out, state

app = group("Saved views.")
SECTION = (60, 'Views')  # the root help's section (adapters.cli.table)
view_app = group("List and drop saved views (rebuild --until-position P --view NAME).")
app.add_typer(view_app, name="view")


def _line(v: dict[str, Any]) -> str:
    size = "size unknown" if v["bytes"] is None else human_size(v["bytes"])
    return (f"{v['view']:12} position {v['position']:<8} {len(v['tables']):>2} tables  "
            f"{size:>10}  purges applied to {v['erased_to']}")


@view_app.command("list")
def view_list() -> None:
    """Every saved view: name, position, tables, size (one line each; --json: one object)."""
    views = [v.as_dict() for v in state.admin_reader().views()]
    for v in views:
        out(v, _line(v))
    if not views and not state.json:
        typer.echo("no saved views")


@view_app.command("drop")
def view_drop(name: Annotated[str, typer.Argument(
        metavar="NAME", help="the view's name, as `view list` shows it")]) -> None:
    """Drop a saved view: its tables and its name (an unknown NAME drops nothing, exit 2)."""
    v = state.admin_reader().drop_view(name).as_dict()
    out({**v, "dropped": True},
        f"dropped view {v['view']} (position {v['position']}, {len(v['tables'])} tables)")
