"""Retail domain tools. Deliberately no ownership checks: writing another customer's record is
possible, so the state diff (not the tool) catches it as an extra effect."""

from __future__ import annotations

import sqlite3
from typing import Any

from tb_engine.tooling import ToolError, load_json, next_id, now, row_or_error


def _order(db: sqlite3.Connection, order_id: str) -> dict[str, Any]:
    order = row_or_error(db, "SELECT * FROM orders WHERE id = ?", (order_id,), f"order {order_id}")
    order["items"] = load_json(order["items"])
    return order


def _refunded(db: sqlite3.Connection, order_id: str) -> float:
    (total,) = db.execute(
        "SELECT COALESCE(SUM(amount), 0) FROM refunds WHERE order_id = ?", (order_id,)
    ).fetchone()
    return round(float(total), 2)


def find_customer_by_email(db: sqlite3.Connection, email: str) -> dict[str, Any]:
    return row_or_error(
        db,
        "SELECT * FROM customers WHERE lower(email) = lower(?)",
        (email.strip(),),
        f"customer with email {email}",
    )


def get_customer(db: sqlite3.Connection, customer_id: str) -> dict[str, Any]:
    return row_or_error(db, "SELECT * FROM customers WHERE id = ?", (customer_id,), f"customer {customer_id}")


def list_customer_orders(db: sqlite3.Connection, customer_id: str) -> list[dict[str, Any]]:
    get_customer(db, customer_id)
    rows = db.execute(
        "SELECT id, status, total FROM orders WHERE customer_id = ? ORDER BY id", (customer_id,)
    )
    return [dict(r) for r in rows]


def get_order(db: sqlite3.Connection, order_id: str) -> dict[str, Any]:
    order = _order(db, order_id)
    order["refunded_total"] = _refunded(db, order_id)
    order["replacements"] = [
        dict(r)
        for r in db.execute("SELECT id, sku, status FROM replacements WHERE order_id = ?", (order_id,))
    ]
    order["returns"] = [
        dict(r)
        for r in db.execute("SELECT id, sku, reason, status FROM returns WHERE order_id = ?", (order_id,))
    ]
    return order


def get_shipments(db: sqlite3.Connection, order_id: str) -> list[dict[str, Any]]:
    _order(db, order_id)
    rows = db.execute(
        "SELECT id, carrier, tracking_number, status FROM shipments WHERE order_id = ? ORDER BY id",
        (order_id,),
    )
    return [dict(r) for r in rows]


def track_shipment(db: sqlite3.Connection, tracking_number: str) -> dict[str, Any]:
    row = row_or_error(
        db,
        "SELECT * FROM shipments WHERE tracking_number = ?",
        (tracking_number,),
        f"tracking number {tracking_number}",
    )
    row["exception_open"] = bool(row["exception_open"])
    row["claim_filed"] = bool(row["claim_filed"])
    return row


def get_ticket(db: sqlite3.Connection, ticket_id: str) -> dict[str, Any]:
    return row_or_error(db, "SELECT * FROM tickets WHERE id = ?", (ticket_id,), f"ticket {ticket_id}")


def list_customer_tickets(db: sqlite3.Connection, customer_id: str) -> list[dict[str, Any]]:
    get_customer(db, customer_id)
    rows = db.execute(
        "SELECT id, order_id, subject, status FROM tickets WHERE customer_id = ? ORDER BY id", (customer_id,)
    )
    return [dict(r) for r in rows]


def update_ticket(db: sqlite3.Connection, ticket_id: str, status: str, note: str = "") -> dict[str, Any]:
    get_ticket(db, ticket_id)
    db.execute(
        "UPDATE tickets SET status = ?, resolution_note = ?, updated_at = ? WHERE id = ?",
        (status, note, now(db), ticket_id),
    )
    return get_ticket(db, ticket_id)


def issue_refund(
    db: sqlite3.Connection, order_id: str, amount: float, method: str, reason: str
) -> dict[str, Any]:
    order = _order(db, order_id)
    if order["status"] not in ("placed", "shipped", "delivered", "cancelled"):
        raise ToolError(f"order {order_id} cannot be refunded in status {order['status']}")
    amount = round(float(amount), 2)
    remaining = round(float(order["total"]) - _refunded(db, order_id), 2)
    if amount > remaining:
        raise ToolError(
            f"refund of {amount:.2f} exceeds the refundable balance {remaining:.2f} of order {order_id}"
        )
    refund_id = next_id(db, "refunds", "RF-")
    db.execute(
        "INSERT INTO refunds (id, order_id, amount, method, reason, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (refund_id, order_id, amount, method, reason, now(db)),
    )
    return {"refund_id": refund_id, "order_id": order_id, "amount": amount, "method": method}


def _sku_in_order(order: dict[str, Any], sku: str) -> None:
    if sku not in [item["sku"] for item in order["items"]]:
        raise ToolError(f"sku {sku} is not part of order {order['id']}")


def create_replacement(db: sqlite3.Connection, order_id: str, sku: str) -> dict[str, Any]:
    order = _order(db, order_id)
    _sku_in_order(order, sku)
    replacement_id = next_id(db, "replacements", "RP-")
    db.execute(
        "INSERT INTO replacements (id, order_id, sku, status, created_at) VALUES (?, ?, ?, 'created', ?)",
        (replacement_id, order_id, sku, now(db)),
    )
    return {"replacement_id": replacement_id, "order_id": order_id, "sku": sku, "status": "created"}


def create_return(db: sqlite3.Connection, order_id: str, sku: str, reason: str) -> dict[str, Any]:
    order = _order(db, order_id)
    if order["status"] != "delivered":
        raise ToolError(f"order {order_id} has not been delivered; only delivered orders can be returned")
    _sku_in_order(order, sku)
    return_id = next_id(db, "returns", "RT-")
    db.execute(
        "INSERT INTO returns (id, order_id, sku, reason, status, created_at) VALUES (?, ?, ?, ?, 'label_sent', ?)",
        (return_id, order_id, sku, reason, now(db)),
    )
    return {"return_id": return_id, "order_id": order_id, "sku": sku, "status": "label_sent"}


def update_shipping_address(db: sqlite3.Connection, order_id: str, address: str) -> dict[str, Any]:
    order = _order(db, order_id)
    if order["status"] != "placed":
        raise ToolError(f"order {order_id} is {order['status']}; the address can only change before shipment")
    db.execute(
        "UPDATE orders SET shipping_address = ?, updated_at = ? WHERE id = ?", (address, now(db), order_id)
    )
    return {"order_id": order_id, "shipping_address": address}


def cancel_order(db: sqlite3.Connection, order_id: str) -> dict[str, Any]:
    order = _order(db, order_id)
    if order["status"] != "placed":
        raise ToolError(
            f"order {order_id} is {order['status']}; only orders not yet shipped can be cancelled"
        )
    db.execute("UPDATE orders SET status = 'cancelled', updated_at = ? WHERE id = ?", (now(db), order_id))
    return {"order_id": order_id, "status": "cancelled"}


def file_carrier_claim(db: sqlite3.Connection, shipment_id: str) -> dict[str, Any]:
    shipment = row_or_error(
        db, "SELECT * FROM shipments WHERE id = ?", (shipment_id,), f"shipment {shipment_id}"
    )
    if not shipment["exception_open"] and shipment["status"] != "lost":
        raise ToolError(f"shipment {shipment_id} has no open carrier exception")
    db.execute("UPDATE shipments SET claim_filed = 1 WHERE id = ?", (shipment_id,))
    return {"shipment_id": shipment_id, "claim_filed": True}
