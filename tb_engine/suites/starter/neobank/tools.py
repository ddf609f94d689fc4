"""Tools of the neobank domain (Fernway): accounts, cards, transactions, disputes, transfers."""

from __future__ import annotations

import sqlite3
from typing import Any

from tb_engine.tooling import ToolError, next_id, now, row_by_id

# Express card delivery is free on paid plans (price list 2025).
EXPRESS_DELIVERY_FEE = {"standard": 6.9, "plus": 0.0, "metal": 0.0}
# Outcomes that end a dispute without the customer keeping the money: a provisional credit is taken back.
REVERSING_STATUSES = {"resolved_merchant_refund", "withdrawn", "rejected"}


def _card(db: sqlite3.Connection, card_id: str) -> dict[str, Any]:
    card = row_by_id(db, "cards", card_id, "card")
    card["online_enabled"] = bool(card["online_enabled"])
    return card


def _move_balance(db: sqlite3.Connection, account_id: str, delta: float) -> None:
    db.execute("UPDATE accounts SET balance = round(balance + ?, 2) WHERE id = ?", (delta, account_id))


def find_customer(db: sqlite3.Connection, email: str) -> dict[str, Any]:
    """Look up a customer by email, with their account and card ids."""
    row = db.execute("SELECT * FROM customers WHERE lower(email) = lower(?)", (email,)).fetchone()
    if row is None:
        raise ToolError(f"no customer with email {email}")
    customer = dict(row)
    customer["account_ids"] = [
        r["id"]
        for r in db.execute("SELECT id FROM accounts WHERE customer_id = ? ORDER BY id", (customer["id"],))
    ]
    customer["card_ids"] = [
        r["id"]
        for r in db.execute("SELECT id FROM cards WHERE customer_id = ? ORDER BY id", (customer["id"],))
    ]
    return customer


def get_account(db: sqlite3.Connection, account_id: str) -> dict[str, Any]:
    """An account with its balance, cards and disputes."""
    account = row_by_id(db, "accounts", account_id, "account")
    account["cards"] = [
        _card(db, r["id"])
        for r in db.execute("SELECT id FROM cards WHERE account_id = ? ORDER BY id", (account_id,))
    ]
    account["disputes"] = [
        dict(r) for r in db.execute("SELECT * FROM disputes WHERE account_id = ? ORDER BY id", (account_id,))
    ]
    return account


def list_transactions(db: sqlite3.Connection, account_id: str) -> dict[str, Any]:
    """The account's transactions, newest first (debits are negative)."""
    row_by_id(db, "accounts", account_id, "account")
    rows = db.execute(
        "SELECT * FROM transactions WHERE account_id = ? ORDER BY posted_at DESC, id DESC", (account_id,)
    ).fetchall()
    return {"account_id": account_id, "transactions": [dict(r) for r in rows]}


def set_card_status(db: sqlite3.Connection, card_id: str, status: str) -> dict[str, Any]:
    """Freeze (temporary), block (permanent) or reactivate a card."""
    card = _card(db, card_id)
    if card["status"] == "blocked":
        raise ToolError(f"card {card_id} is blocked permanently; order a replacement instead")
    db.execute("UPDATE cards SET status = ?, updated_at = ? WHERE id = ?", (status, now(db), card_id))
    return {"card_id": card_id, "previous_status": card["status"], "status": status}


def set_card_controls(
    db: sqlite3.Connection,
    card_id: str,
    online_enabled: bool | None = None,
    atm_daily_limit: int | None = None,
) -> dict[str, Any]:
    """Switch online payments on or off and/or set the daily ATM limit (EUR) of a card."""
    card = _card(db, card_id)
    if online_enabled is None and atm_daily_limit is None:
        raise ToolError("give online_enabled and/or atm_daily_limit")
    if online_enabled is not None:
        card["online_enabled"] = online_enabled
    if atm_daily_limit is not None:
        card["atm_daily_limit"] = atm_daily_limit
    db.execute(
        "UPDATE cards SET online_enabled = ?, atm_daily_limit = ?, updated_at = ? WHERE id = ?",
        (int(card["online_enabled"]), card["atm_daily_limit"], now(db), card_id),
    )
    return {
        "card_id": card_id,
        "online_enabled": card["online_enabled"],
        "atm_daily_limit": card["atm_daily_limit"],
    }


def order_replacement_card(db: sqlite3.Connection, card_id: str, delivery: str) -> dict[str, Any]:
    """Order a replacement for a blocked card; any express fee is taken from the account."""
    card = _card(db, card_id)
    if card["status"] != "blocked":
        raise ToolError(f"card {card_id} is {card['status']}; block it before ordering a replacement")
    plan = row_by_id(db, "customers", card["customer_id"], "customer")["plan"]
    fee = EXPRESS_DELIVERY_FEE[plan] if delivery == "express" else 0.0
    order = {
        "id": next_id(db, "card_orders", "ORD-"),
        "card_id": card_id,
        "customer_id": card["customer_id"],
        "delivery": delivery,
        "fee": fee,
        "created_at": now(db),
    }
    db.execute(
        "INSERT INTO card_orders (id, card_id, customer_id, delivery, fee, created_at)"
        " VALUES (:id, :card_id, :customer_id, :delivery, :fee, :created_at)",
        order,
    )
    if fee:
        _move_balance(db, card["account_id"], -fee)
    return order


def open_dispute(
    db: sqlite3.Connection, transaction_id: str, reason: str, amount: float, provisional_credit: bool
) -> dict[str, Any]:
    """Open a dispute on a posted card transaction, optionally crediting the amount provisionally."""
    tx = row_by_id(db, "transactions", transaction_id, "transaction")
    if tx["status"] != "posted":
        raise ToolError(
            f"transaction {transaction_id} is {tx['status']}; only posted transactions can be disputed"
        )
    if tx["amount"] >= 0:
        raise ToolError(f"transaction {transaction_id} is a credit; only debits can be disputed")
    if amount > -tx["amount"]:
        raise ToolError(f"dispute amount {amount} exceeds the transaction amount {-tx['amount']}")
    account = row_by_id(db, "accounts", tx["account_id"], "account")
    dispute = {
        "id": next_id(db, "disputes", "DSP-"),
        "transaction_id": transaction_id,
        "account_id": tx["account_id"],
        "customer_id": account["customer_id"],
        "reason": reason,
        "amount": round(float(amount), 2),
        "provisional_credit": int(provisional_credit),
        "status": "open",
        "created_at": now(db),
    }
    db.execute(
        "INSERT INTO disputes (id, transaction_id, account_id, customer_id, reason, amount, provisional_credit,"
        " status, created_at) VALUES (:id, :transaction_id, :account_id, :customer_id, :reason, :amount,"
        " :provisional_credit, :status, :created_at)",
        dispute,
    )
    if provisional_credit:
        _move_balance(db, tx["account_id"], dispute["amount"])
    dispute["provisional_credit"] = bool(provisional_credit)
    return dispute


def update_dispute(db: sqlite3.Connection, dispute_id: str, status: str) -> dict[str, Any]:
    """Move a dispute to a new status; closing it without a win takes back any provisional credit."""
    dispute = row_by_id(db, "disputes", dispute_id, "dispute")
    if dispute["status"] in REVERSING_STATUSES | {"won"}:
        raise ToolError(f"dispute {dispute_id} is already closed ({dispute['status']})")
    db.execute("UPDATE disputes SET status = ? WHERE id = ?", (status, dispute_id))
    reversed_credit = 0.0
    if status in REVERSING_STATUSES and dispute["provisional_credit"]:
        reversed_credit = dispute["amount"]
        _move_balance(db, dispute["account_id"], -reversed_credit)
    return {"dispute_id": dispute_id, "status": status, "provisional_credit_reversed": reversed_credit}


def internal_transfer(
    db: sqlite3.Connection, from_account_id: str, to_account_id: str, amount: float
) -> dict[str, Any]:
    """Move money (EUR) instantly between two Fernway accounts."""
    source = row_by_id(db, "accounts", from_account_id, "account")
    target = row_by_id(db, "accounts", to_account_id, "account")
    if from_account_id == to_account_id:
        raise ToolError("source and target account are the same")
    for account in (source, target):
        if account["status"] != "active":
            raise ToolError(f"account {account['id']} is {account['status']}")
    if amount > source["balance"]:
        raise ToolError(f"insufficient funds: account {from_account_id} holds {source['balance']}")
    transfer: dict[str, Any] = {
        "id": next_id(db, "transfers", "TRF-"),
        "from_account_id": from_account_id,
        "to_account_id": to_account_id,
        "amount": round(float(amount), 2),
        "created_at": now(db),
    }
    db.execute(
        "INSERT INTO transfers (id, from_account_id, to_account_id, amount, created_at)"
        " VALUES (:id, :from_account_id, :to_account_id, :amount, :created_at)",
        transfer,
    )
    _move_balance(db, from_account_id, -transfer["amount"])
    _move_balance(db, to_account_id, transfer["amount"])
    return transfer
