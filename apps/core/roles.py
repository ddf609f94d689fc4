"""Roles are Django groups with these names; each role includes every role ranked below it."""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    VIEWER = "viewer"  # read everything their teams can see
    TRIAGER = "triager"  # + labels and notes on attempts
    OPERATOR = "operator"  # + launch/cancel campaigns, imports
    ADMIN = "admin"  # + everything, every team

    @property
    def rank(self) -> int:
        return ROLE_ORDER.index(self) + 1


ROLE_ORDER: tuple[Role, ...] = (Role.VIEWER, Role.TRIAGER, Role.OPERATOR, Role.ADMIN)


def parse_role(value: str | Role) -> Role:
    """Return the Role named `value`, or raise ValueError listing the valid names."""
    try:
        return Role(value)
    except ValueError:
        valid = ", ".join(role.value for role in ROLE_ORDER)
        raise ValueError(f"unknown role {value!r}: expected one of {valid}") from None
