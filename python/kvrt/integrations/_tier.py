"""What kvrt's engine integrations share: their configuration (the node,
the principal, the namespace the engine's K/V lives in) and a session that
may be lost and is connected again, so that an engine outlives its node
(it recomputes while the node is gone)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Mapping, Optional

import kvrt

logger = logging.getLogger("kvrt.integrations")


@dataclass
class TierConfig:
    """An engine's place on a kvrt node.

    descriptor            the node's descriptor file (its token directory beside it)
    principal             the engine's principal on the node
    namespace             deployment/tenant: whose K/V this engine shares and reuses
    worker_name           the session's name in the node's statistics and traces
    call_timeout_ms       how long one call may wait on the node (0: libkvrt's default)
    reconnect_interval_s  how often a lost session is tried again [s]
    """

    descriptor: str
    principal: str = "engine"
    namespace: str = "local/default"
    worker_name: str = "engine"
    call_timeout_ms: int = 0
    reconnect_interval_s: float = 5.0

    @staticmethod
    def from_extra(extra: Optional[Mapping[str, Any]], where: str, ignore: frozenset = frozenset()) -> "TierConfig":
        """The configuration from an engine's free-form settings (vLLM's
        kv_connector_extra_config, SGLang's storage extra_config); `ignore`
        names the keys the engine itself reads there."""
        values = {k: v for k, v in dict(extra or {}).items() if k not in ignore}
        if "descriptor" not in values:
            raise ValueError(f"kvrt: {where} needs \"descriptor\" (the node's descriptor file)")
        known = set(TierConfig.__dataclass_fields__)
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"kvrt: unknown {where} keys {sorted(unknown)} (known: {sorted(known)})")
        return TierConfig(**values)


class SessionLink:
    """A kvrt session that may be lost: dropped on ConnectionLost, connected
    again at most every reconnect_interval_s."""

    def __init__(self, config: TierConfig, worker_name: str, namespace: Optional[str]) -> None:
        self.config = config
        self.worker_name = worker_name
        self.namespace = namespace
        self.session: Optional[kvrt.Session] = None
        self.next_try = 0.0
        self.generation = 0  # sessions opened so far: ids of an older one are void

    def get(self) -> Optional[kvrt.Session]:
        if self.session is not None:
            return self.session
        now = time.monotonic()
        if now < self.next_try:
            return None
        self.next_try = now + self.config.reconnect_interval_s
        try:
            s = kvrt.Session(self.config.descriptor, self.config.principal, worker_name=self.worker_name,
                             call_timeout_ms=self.config.call_timeout_ms)
            if self.namespace is not None:
                s.authorize(self.namespace)
        except kvrt.KvrtError as e:
            logger.warning("kvrt: no session on %s (%s); serving without the shared tier", self.config.descriptor, e)
            return None
        self.session = s
        self.generation += 1
        return s

    def lost(self, error: Exception) -> None:
        logger.warning("kvrt: session lost (%s); recomputing until the node is back", error)
        if self.session is not None:
            try:
                self.session.close()
            except kvrt.KvrtError:
                pass
        self.session = None
        self.next_try = time.monotonic() + self.config.reconnect_interval_s

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None
