"""Tools of the service desk domain (Kestrel Group IT & HR): access, assets, onboarding, tickets."""

from __future__ import annotations

import sqlite3
from typing import Any

from tb_engine.tooling import ToolError, now, row_by_id

# A returned asset's new status by the condition it came back in.
RETURN_STATUS = {"working": "in_stock", "damaged": "in_repair", "lost": "lost"}


def _employee(db: sqlite3.Connection, employee_id: str) -> dict[str, Any]:
    employee = row_by_id(db, "employees", employee_id, "employee")
    employee["photo_on_file"] = bool(employee["photo_on_file"])
    return employee


def _rows(db: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> list[dict[str, Any]]:
    return [dict(r) for r in db.execute(sql, params)]


def find_employee(db: sqlite3.Connection, email: str) -> dict[str, Any]:
    """Look up an employee by work email, with the ids of their direct reports."""
    row = db.execute("SELECT id FROM employees WHERE lower(email) = lower(?)", (email,)).fetchone()
    if row is None:
        raise ToolError(f"no employee with email {email}")
    employee = _employee(db, row["id"])
    employee["direct_report_ids"] = [
        r["id"]
        for r in db.execute("SELECT id FROM employees WHERE manager_id = ? ORDER BY id", (employee["id"],))
    ]
    return employee


def get_employee(db: sqlite3.Connection, employee_id: str) -> dict[str, Any]:
    """An employee's record with access grants, access requests, assets, onboarding tasks and tickets."""
    employee = _employee(db, employee_id)
    employee["access"] = _rows(
        db,
        "SELECT g.system_id, s.name AS system_name, s.sensitivity, g.role, g.status FROM access_grants g"
        " JOIN systems s ON s.id = g.system_id WHERE g.employee_id = ? ORDER BY g.system_id",
        (employee_id,),
    )
    employee["access_requests"] = _rows(
        db, "SELECT * FROM access_requests WHERE employee_id = ? ORDER BY id", (employee_id,)
    )
    employee["assets"] = _rows(db, "SELECT * FROM assets WHERE assigned_to = ? ORDER BY id", (employee_id,))
    employee["onboarding_tasks"] = _rows(
        db, "SELECT * FROM onboarding_tasks WHERE employee_id = ? ORDER BY id", (employee_id,)
    )
    employee["tickets"] = _rows(db, "SELECT * FROM tickets WHERE employee_id = ? ORDER BY id", (employee_id,))
    return employee


def list_stock(db: sqlite3.Connection, kind: str) -> dict[str, Any]:
    """Assets of a kind that are in stock and can be handed out, lowest asset id first."""
    return {
        "kind": kind,
        "in_stock": _rows(
            db, "SELECT * FROM assets WHERE kind = ? AND status = 'in_stock' ORDER BY id", (kind,)
        ),
    }


def decide_access_request(
    db: sqlite3.Connection, request_id: str, decision: str, approver_id: str
) -> dict[str, Any]:
    """Record a manager's approval or rejection of a pending access request (does not grant access)."""
    request = row_by_id(db, "access_requests", request_id, "access request")
    if request["status"] != "pending":
        raise ToolError(f"access request {request_id} is already {request['status']}")
    _employee(db, approver_id)
    db.execute(
        "UPDATE access_requests SET status = ?, approver_id = ?, updated_at = ? WHERE id = ?",
        (decision, approver_id, now(db), request_id),
    )
    return {"request_id": request_id, "status": decision, "approver_id": approver_id}


def grant_access(db: sqlite3.Connection, employee_id: str, system_id: str, role: str) -> dict[str, Any]:
    """Give an employee a role on a system (or change the role of an existing grant)."""
    employee = _employee(db, employee_id)
    if employee["status"] == "left":
        raise ToolError(f"employee {employee_id} has left the company")
    row_by_id(db, "systems", system_id, "system")
    existing = db.execute(
        "SELECT * FROM access_grants WHERE employee_id = ? AND system_id = ?", (employee_id, system_id)
    ).fetchone()
    if existing is not None and existing["status"] == "active" and existing["role"] == role:
        raise ToolError(f"employee {employee_id} already has {role} access to {system_id}")
    if existing is None:
        db.execute(
            "INSERT INTO access_grants (employee_id, system_id, role, status, changed_at) VALUES (?, ?, ?, 'active', ?)",
            (employee_id, system_id, role, now(db)),
        )
    else:
        db.execute(
            "UPDATE access_grants SET role = ?, status = 'active', changed_at = ? WHERE employee_id = ? AND system_id = ?",
            (role, now(db), employee_id, system_id),
        )
    return {"employee_id": employee_id, "system_id": system_id, "role": role, "status": "active"}


def revoke_access(db: sqlite3.Connection, employee_id: str, system_id: str) -> dict[str, Any]:
    """Remove an employee's access to a system."""
    existing = db.execute(
        "SELECT * FROM access_grants WHERE employee_id = ? AND system_id = ?", (employee_id, system_id)
    ).fetchone()
    if existing is None or existing["status"] != "active":
        raise ToolError(f"employee {employee_id} has no active access to {system_id}")
    db.execute(
        "UPDATE access_grants SET status = 'revoked', changed_at = ? WHERE employee_id = ? AND system_id = ?",
        (now(db), employee_id, system_id),
    )
    return {"employee_id": employee_id, "system_id": system_id, "status": "revoked"}


def assign_asset(db: sqlite3.Connection, asset_id: str, employee_id: str) -> dict[str, Any]:
    """Hand an in-stock asset to an employee."""
    asset = row_by_id(db, "assets", asset_id, "asset")
    _employee(db, employee_id)
    if asset["status"] != "in_stock":
        raise ToolError(f"asset {asset_id} is {asset['status']}, not in stock")
    db.execute("UPDATE assets SET status = 'assigned', assigned_to = ? WHERE id = ?", (employee_id, asset_id))
    return {"asset_id": asset_id, "assigned_to": employee_id, "model": asset["model"]}


def return_asset(db: sqlite3.Connection, asset_id: str, condition: str) -> dict[str, Any]:
    """Take an asset back from its holder: working -> in stock, damaged -> in repair, lost -> lost."""
    asset = row_by_id(db, "assets", asset_id, "asset")
    if asset["status"] != "assigned":
        raise ToolError(f"asset {asset_id} is {asset['status']}, not assigned to anyone")
    status = RETURN_STATUS[condition]
    db.execute("UPDATE assets SET status = ?, assigned_to = NULL WHERE id = ?", (status, asset_id))
    return {"asset_id": asset_id, "previous_holder": asset["assigned_to"], "status": status}


def update_onboarding_task(db: sqlite3.Connection, task_id: str, status: str) -> dict[str, Any]:
    """Set the status of an onboarding checklist task."""
    row_by_id(db, "onboarding_tasks", task_id, "onboarding task")
    db.execute(
        "UPDATE onboarding_tasks SET status = ?, updated_at = ? WHERE id = ?", (status, now(db), task_id)
    )
    return {"task_id": task_id, "status": status}


def update_ticket(db: sqlite3.Connection, ticket_id: str, status: str, note: str) -> dict[str, Any]:
    """Set a ticket's status and record a working note."""
    ticket = row_by_id(db, "tickets", ticket_id, "ticket")
    if ticket["status"] == "resolved" and status != "resolved":
        raise ToolError(f"ticket {ticket_id} is resolved; open a new ticket instead")
    db.execute(
        "UPDATE tickets SET status = ?, note = ?, updated_at = ? WHERE id = ?",
        (status, note, now(db), ticket_id),
    )
    return {"ticket_id": ticket_id, "status": status}
