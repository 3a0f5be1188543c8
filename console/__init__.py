"""``samsa console``: the web console for a Kafka-compatible cluster.

A process of its own that talks to the cluster only as a Kafka client (``tools.admin_client`` for the
admin APIs, aiokafka for browsing and producing messages) and reads the brokers' Prometheus endpoints
when it is given them, so it serves Apache Kafka clusters as well as Samsa's. aiohttp serves the pages
(Jinja2 templates, escaped by default); htmx and uPlot, pinned from the npm registry and served from
``static/vendor/``, make them live: one server-sent event stream per page (``live.py``) re-renders the
page's sections and sends those that changed.
"""
