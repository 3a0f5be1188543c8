"""``meta.properties`` in every log dir: the broker id and cluster id the data belongs to.

A log dir that already belongs to another broker or cluster is refused at start, so that a
misconfigured broker cannot serve (or damage) someone else's data.
"""

from __future__ import annotations

import base64
import os
import uuid
from pathlib import Path

from server_common.config import read_properties

FILE_NAME = "meta.properties"


class InconsistentMetaPropertiesError(RuntimeError):
    pass


def new_cluster_id() -> str:
    """A cluster id in Kafka's form: a random UUID, base64url without padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def stored_cluster_id(log_dirs: list[str]) -> str:
    """The cluster id a log dir already records, or a new one (what a new cluster will be called)."""
    for d in log_dirs:
        path = Path(d) / FILE_NAME
        if path.exists():
            found = read_properties(path.read_text(encoding="utf-8")).get("cluster.id")
            if found:
                return found
    return new_cluster_id()


def ensure_meta_properties(log_dirs: list[str], broker_id: int, cluster_id: str | None = None) -> str:
    """Checks (or writes) meta.properties in each log dir and returns the cluster id.

    ``cluster_id`` is the cluster's id when the cluster already knows it (from ZooKeeper); otherwise the
    stored one is kept, or a new one made.
    """
    stored: dict[Path, dict[str, str]] = {}
    for d in log_dirs:
        path = Path(d) / FILE_NAME
        Path(d).mkdir(parents=True, exist_ok=True)
        if path.exists():
            stored[path] = read_properties(path.read_text(encoding="utf-8"))
    for path, props in stored.items():
        if int(props.get("broker.id", broker_id)) != broker_id:
            raise InconsistentMetaPropertiesError(
                f"configured broker.id {broker_id} does not match broker.id {props['broker.id']} in {path}"
            )
    ids = {props["cluster.id"] for props in stored.values() if "cluster.id" in props}
    if cluster_id is not None:
        ids.add(cluster_id)
    if len(ids) > 1:
        raise InconsistentMetaPropertiesError(
            f"the log dirs belong to different clusters ({', '.join(sorted(ids))}); refusing to start"
        )
    cluster = ids.pop() if ids else new_cluster_id()
    text = f"#\n# written by samsa\ncluster.id={cluster}\nversion=0\nbroker.id={broker_id}\n"
    for d in log_dirs:
        path = Path(d) / FILE_NAME
        if stored.get(path, {}).get("cluster.id") != cluster:
            _write_atomically(path, text)
    return cluster
