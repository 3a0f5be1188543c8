"""Access to the console and the console on a secured cluster, with a cluster of this module's own:
``LocalCluster(secure=True, console=True)`` (SASL_SSL with SCRAM-SHA-512, the ACL authorizer on), whose
console authenticates as the cluster's admin (its ``--command-config``) and asks browsers for a user
name and password (``--user/--password``). Without them every path answers 401; with them the pages show
the cluster's brokers, its ACLs and its SCRAM users."""

from __future__ import annotations

import base64
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browser import BrowserPage, off_the_loop
from tests.support.cluster import Cluster, chroot
from tools import acls
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration

USER, PASSWORD = "operator", "console-secret"
TOPIC = "secure-console-topic"


@pytest.fixture(scope="module")
def secure_cluster(
    tmp_path_factory: pytest.TempPathFactory, zookeeper_server: ZooKeeperServer
) -> Iterator[Cluster]:
    """One broker behind SASL_SSL and ACLs, with the console asking for ``USER``/``PASSWORD``."""
    cluster = Cluster(
        tmp_path_factory.mktemp("secure-console"),
        chroot(zookeeper_server, "samsa-secure-console"),
        brokers=1,
        secure=True,
        console=True,
    )
    assert cluster.console_node is not None
    cluster.console_node.overrides.update(user=USER, password=PASSWORD, refresh="1")
    off_the_loop(cluster.start)  # the module's browser may be up already, with Playwright's loop running
    try:
        yield cluster
    finally:
        off_the_loop(cluster.stop)


def _get(url: str, credentials: tuple[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(url)
    if credentials is not None:
        token = base64.b64encode(":".join(credentials).encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def test_without_the_user_and_password_every_path_answers_401_and_with_them_the_page(
    secure_cluster: Cluster,
) -> None:
    assert secure_cluster.console_node is not None
    url = secure_cluster.console_node.url
    for path in ("/", "/security", "/static/console.css", "/events/cluster"):
        status, headers, body = _get(url + path)
        assert status == 401, path
        assert headers["WWW-Authenticate"].startswith('Basic realm="samsa console"')
        assert "user name and password" in body
    assert _get(url + "/", (USER, "wrong"))[0] == 401
    assert _get(url + "/", ("someone", PASSWORD))[0] == 401
    status, _, body = _get(url + "/", (USER, PASSWORD))
    assert status == 200
    assert secure_cluster.broker(1).address in body


def _add_acls(cluster: Cluster) -> None:
    """ACLs as an operator adds them: samsa acls over SASL_SSL with the admin's client.properties."""
    cluster.create_topic(TOPIC, partitions=1, replication_factor=1)
    common = [
        "--bootstrap-server",
        cluster.bootstrap,
        "--command-config",
        str(cluster.client_properties_path),
    ]
    assert acls.main([*common, "--add", "--allow-principal", "User:secure-reader", "--operation", "Read",
                      "--topic", TOPIC]) == 0  # fmt: skip
    assert acls.main([*common, "--add", "--deny-principal", "User:secure-reader", "--operation", "Read",
                      "--group", "secure-", "--resource-pattern-type", "prefixed"]) == 0  # fmt: skip


def test_on_a_secured_cluster_the_console_shows_its_brokers_acls_and_scram_users(
    secure_cluster: Cluster, browser: Any, request: pytest.FixtureRequest
) -> None:
    assert secure_cluster.console_node is not None
    off_the_loop(_add_acls, secure_cluster)
    context = browser.new_context(
        viewport={"width": 1400, "height": 900}, http_credentials={"username": USER, "password": PASSWORD}
    )
    page = BrowserPage(context.new_page(), secure_cluster.console_node.url)
    try:
        page.goto("/")
        broker = page.page.locator('#broker-table tr[data-broker="1"]')
        assert secure_cluster.broker(1).address in broker.inner_text() and "up" in broker.inner_text()
        topics = page.page.locator(".card", has=page.page.locator(".label", has_text="topics"))
        # The snapshot the 401 test's page was drawn from predates the topic: it arrives live.
        topics.locator(".value", has_text=re.compile(r"^1$")).wait_for()

        page.goto("/security")
        allow = page.page.locator(f'#acl-table tr[data-resource="TOPIC:{TOPIC}"]')
        assert allow.locator("td").all_inner_texts() == [
            "TOPIC", TOPIC, "LITERAL", "User:secure-reader", "*", "Read", "Allow",
        ]  # fmt: skip
        deny = page.page.locator('#acl-table tr[data-resource="GROUP:secure-"]')
        assert deny.locator("td").all_inner_texts() == [
            "GROUP", "secure-", "PREFIXED", "User:secure-reader", "*", "Read", "Deny",
        ]  # fmt: skip
        # The cluster's two users (the admin the console signs in as, and the brokers'), never a password.
        for user in ("admin", "broker"):
            row = page.page.locator(f'#user-table tr[data-user="{user}"]')
            assert row.locator("td").all_inner_texts() == [user, "SCRAM-SHA-512", "4,096"]
        assert secure_cluster.security is not None
        assert secure_cluster.security.admin_password not in page.page.content()
        page.readme_shot("security")

        # Live through the basic auth too: an ACL added now appears without a reload.
        common = ["--bootstrap-server", secure_cluster.bootstrap, "--command-config",
                  str(secure_cluster.client_properties_path)]  # fmt: skip
        added = off_the_loop(acls.main, [*common, "--add", "--allow-principal", "User:secure-writer",
                                         "--operation", "Write", "--topic", TOPIC])  # fmt: skip
        assert added == 0
        page.page.locator('#acl-table tr[data-principal="User:secure-writer"]').wait_for()

        # The filter keeps the ACLs containing its text, and says so when none does.
        page.goto("/security?q=prefixed")
        assert page.page.locator("#acl-table tbody tr").count() == 1
        page.goto("/security?q=nobody-has-this")
        assert "No ACL contains" in page.page.get_by_test_id("no-acls").inner_text()
        page.screenshot(request.node.name)
        assert page.errors == [], page.errors
    finally:
        context.close()
