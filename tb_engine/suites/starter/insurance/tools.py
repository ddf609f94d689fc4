"""Tools of the insurance domain (Harbourline Auto): policies, claims, payouts, adjuster notes."""

from __future__ import annotations

import sqlite3
from typing import Any

from tb_engine.tooling import ToolError, next_id, now, row_by_id

# Monthly premium = base premium x deductible factor + optional covers (pricing sheet 2025-Q3).
DEDUCTIBLE_FACTORS = {250: 1.12, 500: 1.0, 1000: 0.9}
COVER_PRICES = {"rental": 4.5, "glass": 3.0}


def _premium(policy: dict[str, Any]) -> float:
    """Monthly premium of a policy row from its base price, deductible and covers."""
    price = policy["base_premium_monthly"] * DEDUCTIBLE_FACTORS[policy["deductible"]]
    if policy["rental_cover"]:
        price += COVER_PRICES["rental"]
    if policy["glass_cover"]:
        price += COVER_PRICES["glass"]
    return round(price, 2)


def _as_bool_flags(policy: dict[str, Any]) -> dict[str, Any]:
    policy["rental_cover"] = bool(policy["rental_cover"])
    policy["glass_cover"] = bool(policy["glass_cover"])
    return policy


def find_policyholder(db: sqlite3.Connection, email: str) -> dict[str, Any]:
    """Look up a policyholder by email, with the ids of their policies."""
    row = db.execute("SELECT * FROM policyholders WHERE lower(email) = lower(?)", (email,)).fetchone()
    if row is None:
        raise ToolError(f"no policyholder with email {email}")
    holder = dict(row)
    holder["policy_ids"] = [
        r["id"]
        for r in db.execute("SELECT id FROM policies WHERE holder_id = ? ORDER BY id", (holder["id"],))
    ]
    return holder


def get_policy(db: sqlite3.Connection, policy_id: str) -> dict[str, Any]:
    """A policy with its covers, vehicles and the ids and statuses of its claims."""
    policy = _as_bool_flags(row_by_id(db, "policies", policy_id, "policy"))
    policy["vehicles"] = [
        dict(r) for r in db.execute("SELECT * FROM vehicles WHERE policy_id = ? ORDER BY id", (policy_id,))
    ]
    policy["claims"] = [
        dict(r)
        for r in db.execute(
            "SELECT id, vehicle_id, claim_type, status FROM claims WHERE policy_id = ? ORDER BY id",
            (policy_id,),
        )
    ]
    return policy


def get_claim(db: sqlite3.Connection, claim_id: str) -> dict[str, Any]:
    """A claim with its repair shop, payouts and adjuster notes."""
    claim = row_by_id(db, "claims", claim_id, "claim")
    claim["repair_shop"] = (
        row_by_id(db, "repair_shops", claim["repair_shop_id"], "repair shop")
        if claim["repair_shop_id"]
        else None
    )
    claim["payouts"] = [
        dict(r) for r in db.execute("SELECT * FROM payouts WHERE claim_id = ? ORDER BY id", (claim_id,))
    ]
    claim["notes"] = [
        dict(r)
        for r in db.execute("SELECT * FROM adjuster_notes WHERE claim_id = ? ORDER BY id", (claim_id,))
    ]
    return claim


def update_claim_status(db: sqlite3.Connection, claim_id: str, status: str) -> dict[str, Any]:
    """Move a claim to a new status."""
    claim = row_by_id(db, "claims", claim_id, "claim")
    if claim["status"] in ("denied", "closed"):
        raise ToolError(f"claim {claim_id} is {claim['status']} and cannot change status")
    db.execute("UPDATE claims SET status = ?, updated_at = ? WHERE id = ?", (status, now(db), claim_id))
    return {"claim_id": claim_id, "previous_status": claim["status"], "status": status}


def issue_payout(db: sqlite3.Connection, claim_id: str, payee: str, amount: float) -> dict[str, Any]:
    """Pay an amount (GBP) on a claim to the policyholder, the repair shop or a rental company."""
    claim = row_by_id(db, "claims", claim_id, "claim")
    if claim["status"] in ("denied", "closed"):
        raise ToolError(f"claim {claim_id} is {claim['status']}; nothing can be paid on it")
    if payee == "repair_shop" and not claim["repair_shop_id"]:
        raise ToolError(f"claim {claim_id} has no repair shop on file")
    payout = {
        "id": next_id(db, "payouts", "PO-"),
        "claim_id": claim_id,
        "payee": payee,
        "payee_ref": claim["repair_shop_id"] if payee == "repair_shop" else claim["policy_id"],
        "amount": round(float(amount), 2),
        "created_at": now(db),
    }
    db.execute(
        "INSERT INTO payouts (id, claim_id, payee, payee_ref, amount, created_at)"
        " VALUES (:id, :claim_id, :payee, :payee_ref, :amount, :created_at)",
        payout,
    )
    return payout


def add_adjuster_note(db: sqlite3.Connection, claim_id: str, category: str, text: str) -> dict[str, Any]:
    """Add a categorised adjuster note to a claim's file."""
    row_by_id(db, "claims", claim_id, "claim")
    note = {
        "id": next_id(db, "adjuster_notes", "NT-"),
        "claim_id": claim_id,
        "category": category,
        "text": text,
        "created_at": now(db),
    }
    db.execute(
        "INSERT INTO adjuster_notes (id, claim_id, category, text, created_at)"
        " VALUES (:id, :claim_id, :category, :text, :created_at)",
        note,
    )
    return note


def change_deductible(db: sqlite3.Connection, policy_id: str, deductible: int) -> dict[str, Any]:
    """Set a policy's deductible (GBP) and reprice its monthly premium."""
    policy = row_by_id(db, "policies", policy_id, "policy")
    if policy["status"] != "active":
        raise ToolError(f"policy {policy_id} is {policy['status']}; only active policies can be changed")
    if deductible == policy["deductible"]:
        raise ToolError(f"policy {policy_id} already has a deductible of {deductible}")
    policy["deductible"] = deductible
    premium = _premium(policy)
    db.execute(
        "UPDATE policies SET deductible = ?, premium_monthly = ?, updated_at = ? WHERE id = ?",
        (deductible, premium, now(db), policy_id),
    )
    return {"policy_id": policy_id, "deductible": deductible, "premium_monthly": premium}


def add_cover(db: sqlite3.Connection, policy_id: str, cover: str) -> dict[str, Any]:
    """Add an optional cover (rental car or glass) to a comprehensive policy and reprice it."""
    policy = row_by_id(db, "policies", policy_id, "policy")
    if policy["status"] != "active":
        raise ToolError(f"policy {policy_id} is {policy['status']}; only active policies can be changed")
    if policy["product"] != "comprehensive":
        raise ToolError(
            f"optional covers are only sold on comprehensive policies; {policy_id} is {policy['product']}"
        )
    column = f"{cover}_cover"
    if policy[column]:
        raise ToolError(f"policy {policy_id} already has {cover} cover")
    policy[column] = 1
    premium = _premium(policy)
    db.execute(
        f"UPDATE policies SET {column} = 1, premium_monthly = ?, updated_at = ? WHERE id = ?",
        (premium, now(db), policy_id),
    )
    return {"policy_id": policy_id, "cover": cover, "premium_monthly": premium}
