"""The controller's own ACL authorizer: built from authorizer.class.name with the controller's
super.users (its ACLs are loaded from ZooKeeper at startup, zk/acls.py), none without the setting, and
an unknown class refused when the config is read, naming the setting."""

from __future__ import annotations

import pytest

from controller.config import ControllerConfig
from controller.server import ControllerServer
from server_common.acl_authorizer import AclAuthorizer
from server_common.config import ConfigError
from server_common.principal import KafkaPrincipal

BASE = {"controller.id": "9001", "zookeeper.connect": "127.0.0.1:1"}


def test_the_controller_builds_its_acl_authorizer_from_its_config() -> None:
    server = ControllerServer(
        ControllerConfig(
            {
                **BASE,
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                "super.users": "User:broker",
                "allow.everyone.if.no.acl.found": "true",
            }
        )
    )
    assert isinstance(server.authorizer, AclAuthorizer)
    assert server.authorizer.super_users == {KafkaPrincipal("User", "broker")}
    assert server.authorizer.allow_everyone_if_no_acl_found
    assert ControllerServer(ControllerConfig(BASE)).authorizer is None


def test_an_unknown_authorizer_class_is_refused_naming_the_setting() -> None:
    with pytest.raises(ConfigError, match=r"authorizer\.class\.name='com\.example\.Mine' is invalid: Class"):
        ControllerConfig({**BASE, "authorizer.class.name": "com.example.Mine"})
