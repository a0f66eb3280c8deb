from projections.tablestore import KeyRange, key_range, prefix_stop


def test_prefix_stop_is_the_next_key_after_every_prefixed_one() -> None:
    assert prefix_stop(b"ab") == b"ac"
    assert prefix_stop(b"a\xff") == b"b"
    assert prefix_stop(b"\xff\xff") is None


def test_forward_bounds_are_start_inclusive_stop_exclusive() -> None:
    assert key_range(prefix=None, start=b"b", stop=b"d", reverse=False) == KeyRange(
        b"b", b"d", False
    )


def test_reverse_bounds_swap_start_and_stop() -> None:
    assert key_range(prefix=None, start=b"d", stop=b"b", reverse=True) == KeyRange(
        b"b\x00", b"d", True
    )


def test_prefix_narrows_the_bounds() -> None:
    assert key_range(prefix=b"k", start=None, stop=None, reverse=True) == KeyRange(
        b"k", b"l", False
    )
    assert key_range(prefix=b"k", start=b"a", stop=b"kz", reverse=False) == KeyRange(
        b"k", b"kz", False
    )
    assert key_range(prefix=b"k", start=b"b", stop=b"a", reverse=False).is_empty()
