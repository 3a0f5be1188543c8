"""Fault tests (issue 5): Jepsen-style histories, a checker, fault injection and the scenarios."""
