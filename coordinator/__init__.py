"""Group and transaction coordinators, built on the broker's log API."""
