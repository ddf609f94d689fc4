"""Re-grading a stored ThinkingBox attempt: S0 and the new SG from a fresh server, SR from its record.

* S0 and SG: one fresh server process (from the domain's warm pool, as an attempt gets one) is
  initialised with the task as now defined and asked for its effects with no call made: its
  ``initial_db_state`` is S0 and its ``golden_db_state`` is the server's own golden replay of the
  new definition; its hashes of both are checked against ours under the server's declarations, so
  the server's hash verdict on a rebuilt SR is the one the server would give.
* SR: S0 + the attempt's raw state record (``state_record``), checked against the digests of the
  S0 it ran against and of its own SR, and against the server's stored SR hash.
* then the table specs inferred from S0 and SG as an attempt infers them, our classified diff, the
  checks and the verdict with the server's hash verdict of record (``tb_engine.regrade``).

Anything that does not check out is *not re-gradable* with the reason, never a guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tb_engine.interfaces import InfraError
from tb_engine.snapshot import Snapshot
from tb_engine.spec import DomainSpec, TableSpec, TaskSpec
from tb_engine.thinkingbox.declarations import ServerDeclarations
from tb_engine.thinkingbox.effects import effects_states, infer_table_specs, snapshot_of
from tb_engine.thinkingbox.errors import ThinkingBoxFormatError
from tb_engine.thinkingbox.state_record import StateRecordError, rebuilt_result, state_digest

NO_RECORD = (
    "no state record stored (recorded before ThinkingBox attempts kept one, or with evidence 'verdict'): "
    "SR cannot be rebuilt exactly from its effects (they are over table specs inferred from the old SG)"
)

Rows = dict[str, list[dict[str, Any]]]


@dataclass(frozen=True)
class ServerBasis:
    """A task's S0 and SG as a fresh server reports them, with what grading on them needs."""

    server: str
    initial_rows: Rows
    golden_rows: Rows
    golden_hash: str | None  # the server's hash of SG (None: it sends none, our diff decides)
    declarations: ServerDeclarations
    specs: dict[str, TableSpec]
    initial: Snapshot
    golden: Snapshot
    initial_digest: str  # state_digest(initial_rows): the S0 each attempt's record must name


def server_basis(domain: DomainSpec, task: TaskSpec) -> ServerBasis | str:
    """S0 and SG of the task as now defined, from the server's golden replay in a fresh process; or
    why no attempt of the task can be re-graded."""
    from tb_engine.thinkingbox.mcp_pool import backend_for_domain  # noqa: PLC0415 — the pool imports the runner's modules

    try:
        backend = backend_for_domain(domain, task)
        try:
            answer = backend.effects()
            declarations = backend.hash_declarations()
            server = backend.server
        finally:
            backend.close()
    except InfraError as exc:
        return f"the server's golden replay failed: {exc}"
    if answer.get("status") == "error":
        return (
            f"the new definition is invalid: the server's golden replay failed: {answer.get('message', '')}"
        )
    try:
        states = effects_states(server, answer, declarations)
    except ThinkingBoxFormatError as exc:
        return f"the server's effects answer is malformed: {exc}"
    golden_hash = answer.get("golden_db_hash")
    if golden_hash is not None and (
        declarations.state_hash(states.golden) != golden_hash
        or declarations.state_hash(states.result) != answer.get("result_db_hash")
    ):
        return (
            "our hashing under the server's declarations does not reproduce its S0 and SG hashes, so its "
            "verdict on a rebuilt SR cannot be computed"
        )
    specs = infer_table_specs(server, [states.initial, states.golden], declarations)
    initial, golden = snapshot_of(states.initial, specs), snapshot_of(states.golden, specs)
    return ServerBasis(
        server,
        states.initial,
        states.golden,
        golden_hash,
        declarations,
        specs,
        initial,
        golden,
        state_digest(states.initial),
    )


def server_states(
    basis: ServerBasis, stored: Mapping[str, Any]
) -> tuple[Snapshot, Snapshot, Snapshot, bool | None] | str:
    """(S0, SR, SG, the server's hash verdict on SR) for one stored attempt, or why not re-gradable."""
    thinkingbox = (stored.get("extra") or {}).get("thinkingbox") or {}
    record = thinkingbox.get("state_record")
    if not isinstance(record, Mapping):
        return NO_RECORD
    try:
        result_rows = rebuilt_result(basis.initial_rows, record, initial_digest=basis.initial_digest)
    except StateRecordError as exc:
        return f"SR cannot be rebuilt from the stored state record: {exc}"
    state_of_record = None
    if basis.golden_hash is not None:
        result_hash = basis.declarations.state_hash(result_rows)
        if result_hash != record.get("result_db_hash"):
            return "the server's hash of the rebuilt SR is not the SR hash it reported for the attempt"
        state_of_record = result_hash == basis.golden_hash
    specs, initial, golden = basis.specs, basis.initial, basis.golden
    new_tables = {name: rows for name, rows in result_rows.items() if name not in specs}
    if new_tables:  # a table only SR has: specs as the attempt's backend added it, S0/SG built over them
        specs = {**specs, **infer_table_specs(basis.server, [new_tables], basis.declarations)}
        initial, golden = snapshot_of(basis.initial_rows, specs), snapshot_of(basis.golden_rows, specs)
    result = snapshot_of(result_rows, specs)
    return initial, result, golden, state_of_record
