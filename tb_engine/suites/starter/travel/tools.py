"""Tools of the travel domain (Meridian Travel): bookings, room changes, approvals, refunds, cases."""

from __future__ import annotations

import sqlite3
from datetime import date
from typing import Any

from tb_engine.tooling import ToolError, next_id, now, row_by_id

# A downgrade refund up to this amount is approved on the spot by the duty manager;
# anything larger waits for the regional manager (the approval stays pending).
DUTY_MANAGER_LIMIT = 300.0
DUTY_MANAGER_ID = "MGR-DUTY-07"


def _booking(db: sqlite3.Connection, booking_id: str) -> dict[str, Any]:
    return row_by_id(db, "bookings", booking_id, "booking")


def _room_type(db: sqlite3.Connection, room_type_id: str) -> dict[str, Any]:
    return row_by_id(db, "room_types", room_type_id, "room type")


def _nights(check_in: str, check_out: str) -> int:
    try:
        nights = (date.fromisoformat(check_out) - date.fromisoformat(check_in)).days
    except ValueError as exc:
        raise ToolError(f"dates must be YYYY-MM-DD: {exc}") from None
    if nights < 1:
        raise ToolError("check_out must be at least one day after check_in")
    return nights


def _require_active(booking: dict[str, Any]) -> None:
    if booking["status"] != "confirmed":
        raise ToolError(
            f"booking {booking['id']} is {booking['status']}; only confirmed bookings can be changed"
        )


def _refunded_so_far(db: sqlite3.Connection, booking_id: str) -> float:
    row = db.execute(
        "SELECT COALESCE(SUM(amount), 0) AS total FROM payments WHERE booking_id = ? AND kind = 'refund'",
        (booking_id,),
    ).fetchone()
    return float(row["total"])


def find_traveller(db: sqlite3.Connection, email: str) -> dict[str, Any]:
    """Look up a traveller by email, with the ids of their bookings."""
    row = db.execute("SELECT * FROM travellers WHERE lower(email) = lower(?)", (email,)).fetchone()
    if row is None:
        raise ToolError(f"no traveller with email {email}")
    traveller = dict(row)
    traveller["booking_ids"] = [
        r["id"]
        for r in db.execute("SELECT id FROM bookings WHERE traveller_id = ? ORDER BY id", (traveller["id"],))
    ]
    return traveller


def get_booking(db: sqlite3.Connection, booking_id: str) -> dict[str, Any]:
    """A booking with its hotel, room type, payments and open support cases."""
    booking = _booking(db, booking_id)
    booking["hotel"] = row_by_id(db, "hotels", booking["hotel_id"], "hotel")
    booking["room_type"] = _room_type(db, booking["room_type_id"])
    booking["payments"] = [
        dict(r) for r in db.execute("SELECT * FROM payments WHERE booking_id = ? ORDER BY id", (booking_id,))
    ]
    booking["support_cases"] = [
        dict(r)
        for r in db.execute("SELECT * FROM support_cases WHERE booking_id = ? ORDER BY id", (booking_id,))
    ]
    booking["approvals"] = [
        dict(r) for r in db.execute("SELECT * FROM approvals WHERE booking_id = ? ORDER BY id", (booking_id,))
    ]
    return booking


def list_room_types(db: sqlite3.Connection, hotel_id: str) -> dict[str, Any]:
    """All room types of a hotel, best category first."""
    row_by_id(db, "hotels", hotel_id, "hotel")
    rows = db.execute(
        "SELECT * FROM room_types WHERE hotel_id = ? ORDER BY category_rank DESC, id", (hotel_id,)
    ).fetchall()
    return {"hotel_id": hotel_id, "room_types": [dict(r) for r in rows]}


def request_manager_approval(
    db: sqlite3.Connection, booking_id: str, kind: str, amount: float, reason: str
) -> dict[str, Any]:
    """Record an approval request; the duty manager decides small amounts at once."""
    booking = _booking(db, booking_id)
    _require_active(booking)
    approved = amount <= DUTY_MANAGER_LIMIT
    approval = {
        "id": next_id(db, "approvals", "APR-"),
        "booking_id": booking_id,
        "kind": kind,
        "amount": round(float(amount), 2),
        "status": "approved" if approved else "pending",
        "decided_by": DUTY_MANAGER_ID if approved else None,
        "reason": reason,
        "requested_at": now(db),
    }
    db.execute(
        "INSERT INTO approvals (id, booking_id, kind, amount, status, decided_by, reason, requested_at)"
        " VALUES (:id, :booking_id, :kind, :amount, :status, :decided_by, :reason, :requested_at)",
        approval,
    )
    if not approved:
        approval["message"] = "above the duty manager limit: a regional manager will decide within 24 hours"
    return approval


def change_room_type(db: sqlite3.Connection, booking_id: str, room_type_id: str) -> dict[str, Any]:
    """Move a booking to another room type of the same hotel; the total is repriced."""
    booking = _booking(db, booking_id)
    _require_active(booking)
    room = _room_type(db, room_type_id)
    if room["hotel_id"] != booking["hotel_id"]:
        raise ToolError(f"room type {room_type_id} belongs to another hotel than booking {booking_id}")
    if room_type_id == booking["room_type_id"]:
        raise ToolError(f"booking {booking_id} is already in room type {room_type_id}")
    if booking["guests"] > room["max_guests"]:
        raise ToolError(f"room type {room_type_id} sleeps at most {room['max_guests']} guests")
    new_total = round(room["nightly_rate"] * booking["nights"], 2)
    db.execute(
        "UPDATE bookings SET room_type_id = ?, total_price = ?, updated_at = ? WHERE id = ?",
        (room_type_id, new_total, now(db), booking_id),
    )
    return {
        "booking_id": booking_id,
        "room_type_id": room_type_id,
        "old_total": booking["total_price"],
        "new_total": new_total,
        "price_difference": round(new_total - booking["total_price"], 2),
    }


def change_dates(db: sqlite3.Connection, booking_id: str, check_in: str, check_out: str) -> dict[str, Any]:
    """Move a booking to new dates in the same room type; the total is repriced."""
    booking = _booking(db, booking_id)
    _require_active(booking)
    if booking["rate_plan"] == "non_refundable":
        raise ToolError(f"booking {booking_id} is non-refundable; its dates cannot be changed")
    nights = _nights(check_in, check_out)
    room = _room_type(db, booking["room_type_id"])
    new_total = round(room["nightly_rate"] * nights, 2)
    db.execute(
        "UPDATE bookings SET check_in = ?, check_out = ?, nights = ?, total_price = ?, updated_at = ? WHERE id = ?",
        (check_in, check_out, nights, new_total, now(db), booking_id),
    )
    return {
        "booking_id": booking_id,
        "check_in": check_in,
        "check_out": check_out,
        "nights": nights,
        "old_total": booking["total_price"],
        "new_total": new_total,
    }


def update_guests(db: sqlite3.Connection, booking_id: str, guests: int) -> dict[str, Any]:
    """Change the number of guests on a booking (must fit the room type)."""
    booking = _booking(db, booking_id)
    _require_active(booking)
    room = _room_type(db, booking["room_type_id"])
    if guests > room["max_guests"]:
        raise ToolError(f"room type {room['id']} sleeps at most {room['max_guests']} guests")
    db.execute("UPDATE bookings SET guests = ?, updated_at = ? WHERE id = ?", (guests, now(db), booking_id))
    return {"booking_id": booking_id, "guests": guests}


def cancel_booking(db: sqlite3.Connection, booking_id: str, reason: str) -> dict[str, Any]:
    """Cancel a confirmed booking (refunds are issued separately)."""
    booking = _booking(db, booking_id)
    _require_active(booking)
    db.execute(
        "UPDATE bookings SET status = 'cancelled', cancel_reason = ?, updated_at = ? WHERE id = ?",
        (reason, now(db), booking_id),
    )
    return {"booking_id": booking_id, "status": "cancelled", "amount_paid": booking["amount_paid"]}


def issue_refund(db: sqlite3.Connection, booking_id: str, amount: float, reason: str) -> dict[str, Any]:
    """Refund part or all of what was paid for a booking to the original payment method."""
    booking = _booking(db, booking_id)
    refundable = round(booking["amount_paid"] - _refunded_so_far(db, booking_id), 2)
    if amount > refundable:
        raise ToolError(f"refund {amount} exceeds the {refundable} still refundable on booking {booking_id}")
    payment = {
        "id": next_id(db, "payments", "PAY-"),
        "booking_id": booking_id,
        "kind": "refund",
        "amount": round(float(amount), 2),
        "method": "original_method",
        "reference": None,
        "reason": reason,
        "created_at": now(db),
    }
    db.execute(
        "INSERT INTO payments (id, booking_id, kind, amount, method, reference, reason, created_at)"
        " VALUES (:id, :booking_id, :kind, :amount, :method, :reference, :reason, :created_at)",
        payment,
    )
    return payment


def update_case(db: sqlite3.Connection, case_id: str, status: str, note: str) -> dict[str, Any]:
    """Set the status of a support case and add a working note."""
    row_by_id(db, "support_cases", case_id, "support case")
    db.execute(
        "UPDATE support_cases SET status = ?, note = ?, updated_at = ? WHERE id = ?",
        (status, note, now(db), case_id),
    )
    return {"case_id": case_id, "status": status}
