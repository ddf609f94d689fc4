"""Test support code shared by engine tests (real servers on 127.0.0.1, no mocks)."""
