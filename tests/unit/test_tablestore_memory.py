from adapters.tables.memory import InMemoryTableStore
from projections.tablestore import TableStore
from tests.contracts.tablestore_contract import TableStoreContract


class TestInMemoryTableStore(TableStoreContract):
    def make_store(self) -> TableStore:
        return InMemoryTableStore()
