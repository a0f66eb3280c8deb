"""Quota rules without a store: the usage fold, limits over the default, sizes, and what
over quota means to an MTA."""

from __future__ import annotations

import pickle
from uuid import uuid4

import pytest

from adapters.mta.replies import classify
from domain.errors import QuotaExceeded
from domain.quota import DEFAULT, UNLIMITED, Limits, Quotas, Usage, UsageLedger, parse_size
from tests.history import History

ACCOUNT = "grace@example.org"


def test_an_accounts_own_limits_win_over_the_default_field_by_field():
    default = Limits(bytes=1000, messages=10)
    assert default.over(Limits(DEFAULT, 5)) == Limits(1000, 5)
    assert default.over(Limits(UNLIMITED, DEFAULT)) == Limits(UNLIMITED, 10)
    assert Limits().unlimited and not default.unlimited


@pytest.mark.parametrize(("text", "size"), [
    ("1500", 1500), ("10K", 10240), ("10M", 10 * 1024**2), ("2.5M", int(2.5 * 1024**2)),
    ("1G", 1024**3), ("1GiB", 1024**3), ("1gb", 1024**3), (42, 42)])
def test_sizes_are_read_in_powers_of_1024(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["ten", "", "-1M", "1Q", "M"])
def test_a_size_that_is_not_one_is_named(text):
    with pytest.raises(ValueError, match="size"):
        parse_size(text)


class FakeSource:
    """The log as a list of (position, event); no snapshot."""

    def __init__(self) -> None:
        self.log: list[tuple[int, object]] = []
        self.reads = 0

    def snapshot(self, account_id):
        return 0, Usage()

    def events(self, start, stop, accounts):
        self.reads += 1
        return [(p, e) for p, e in self.log if start <= p <= stop]


def test_the_ledger_follows_deliveries_deletes_and_expunges_of_the_log():
    h = History()
    source = FakeSource()
    ledger = UsageLedger(source, lambda: len(source.log))
    a = h.deliver(ACCOUNT, size=100)
    b = h.deliver(ACCOUNT, size=50)
    source.log = list(h.events)
    account_id = h.account(ACCOUNT).id
    assert ledger.usage(account_id) == Usage(2, 150)
    h.delete(a)
    h.expunge(b)
    source.log = list(h.events)
    assert ledger.usage(account_id) == Usage(0, 0)


def test_own_appends_are_folded_without_reading_the_log_back():
    h = History()
    source = FakeSource()
    ledger = UsageLedger(source, lambda: len(source.log))
    account_id = h.account(ACCOUNT).id
    assert ledger.usage(account_id) == Usage()
    h.deliver(ACCOUNT, size=70)
    source.log = list(h.events)
    reads = source.reads
    ledger.saved(source.log)
    assert ledger.usage(account_id) == Usage(1, 70)
    assert source.reads == reads


def test_a_check_past_a_limit_names_account_limit_and_usage():
    class Account:
        id = uuid4()
        address = ACCOUNT
        quota = [UNLIMITED, 2]

    source = FakeSource()
    quotas = Quotas(Limits(), UsageLedger(source, lambda: 0))
    quotas.ledger._usage[Account.id] = Usage(2, 10)  # type: ignore[union-attr]
    with pytest.raises(QuotaExceeded) as refused:
        quotas.check(Account, 1, 5)
    assert (refused.value.limit, refused.value.used, refused.value.adding) == (2, 2, 1)
    assert "grace@example.org" in str(refused.value)
    again = pickle.loads(pickle.dumps(refused.value))  # the command server sends errors
    assert str(again) == str(refused.value)


def test_over_quota_is_temporary_by_default_and_permanent_if_chosen():
    error = QuotaExceeded(ACCOUNT, "bytes", 1000, 990, 20)
    temporary = classify(error)
    assert (temporary.exit_status, temporary.smtp, temporary.status) == (75, 452, "4.2.2")
    permanent = classify(error, quota_permanent=True)
    assert (permanent.exit_status, permanent.smtp, permanent.status) == (77, 552, "5.2.2")
    assert ACCOUNT in permanent.detail and ACCOUNT not in permanent.text  # ADR 0067


def test_the_ledger_forgets_the_least_recently_checked_accounts_and_reads_them_again():
    h = History()
    source = FakeSource()
    ledger = UsageLedger(source, lambda: len(source.log), max_accounts=1)
    h.deliver(ACCOUNT, size=10)
    h.deliver("ada@example.org", size=20)
    source.log = list(h.events)
    grace, ada = h.account(ACCOUNT).id, h.account("ada@example.org").id
    assert ledger.usage(grace) == Usage(1, 10)
    assert ledger.usage(ada) == Usage(1, 20)
    assert list(ledger._usage) == [ada]
    h.deliver(ACCOUNT, size=5)
    source.log = list(h.events)
    assert ledger.usage(grace) == Usage(2, 15)  # folded again from its snapshot (none)
