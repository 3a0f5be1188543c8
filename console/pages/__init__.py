"""The console's pages, one module each: its ``routes`` (aiohttp), its ``NAV`` entry and its live view."""
