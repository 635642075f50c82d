"""rods_client — the trainer side of rods, standard library only.

rods keeps a GRPO training pool at the policy's capability boundary. A trainer does two things
with it: report each step's per-task rewards, and pull the current pool (or a batch of it).

    from rods_client import RodsClient
    rods = RodsClient("http://127.0.0.1:7500", token="...", campaign="my-campaign")

    # after scoring a step's rollouts (K rewards in [0, 1] per task):
    rods.report_step(step, {"multi_turn_base_17": [0.5, 1.0, ...], ...}, policy_version="ckpt-1200")

    # before building the next step's batch:
    pool = rods.fetch_pool()          # {"version": 7, "tasks": [...]} — cached by version (ETag)
    batch = rods.fetch_batch(64, seed=step)

Trainer adapters (each imports its framework only if it is installed):

* ``rods_client.hf``: a ``transformers``/TRL ``TrainerCallback``, a pool dataset and a reward
  function wrapper that records the rewards the callback reports at each step's end.
* ``rods_client.verl``: a verl curriculum sampler (``AbstractCurriculumSampler``).
* ``rods_client.slime``: a slime ``DataSource`` and a reward post-process hook.

``__version__`` is the gateway API version this client speaks (``GET /openapi.json`` info.version).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any, Dict, List, Mapping, Optional, Sequence

__all__ = ["RodsClient", "RodsError", "__version__"]

# The gateway API version (gateway/api-version.ts); pyproject.toml reads it as the package version.
__version__ = "1.1.0"


class RodsError(Exception):
    """An error answer of the gateway (RFC 9457 problem+json) or a transport failure."""

    def __init__(self, status: int, problem: Dict[str, Any]):
        self.status = status
        self.problem = problem
        detail = problem.get("detail") or problem.get("title") or "request failed"
        fields = "; ".join(f"{e.get('field')}: {e.get('message')}" for e in problem.get("errors", []) or [])
        super().__init__(f"{status} {detail}" + (f" ({fields})" if fields else ""))


class RodsClient:
    def __init__(self, base_url: str, token: str, campaign: str, timeout: float = 30.0):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.campaign = campaign
        self.timeout = timeout
        self._pool: Optional[Dict[str, Any]] = None
        self._etag: Optional[str] = None

    @classmethod
    def from_env(cls, base_url: Optional[str] = None, token: Optional[str] = None,
                 campaign: Optional[str] = None) -> "RodsClient":
        """A client from arguments, else RODS_GATEWAY_URL, RODS_TOKEN and RODS_CAMPAIGN."""
        def pick(value: Optional[str], name: str) -> str:
            value = value or os.environ.get(name)
            if not value:
                raise ValueError(f"rods: set {name} (or pass it to the adapter)")
            return value
        return cls(pick(base_url, "RODS_GATEWAY_URL"), pick(token, "RODS_TOKEN"), pick(campaign, "RODS_CAMPAIGN"))

    def _request(self, method: str, path: str, body: Any = None, headers: Optional[Mapping[str, str]] = None,
                 timeout: Optional[float] = None):
        data = None if body is None else json.dumps(body, allow_nan=False).encode("utf-8")
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                raw = resp.read()
                return resp.status, dict(resp.headers), (json.loads(raw) if raw else None)
        except urllib.error.HTTPError as e:
            if e.code == 304:
                return 304, dict(e.headers), None
            raw = e.read()
            try:
                problem = json.loads(raw)
            except ValueError:
                problem = {"title": raw.decode("utf-8", "replace")}
            raise RodsError(e.code, problem) from None
        except urllib.error.URLError as e:
            raise RodsError(0, {"title": f"gateway unreachable: {e.reason}"}) from None

    def report_step(self, step: int, rewards: Mapping[str, Sequence[float]], policy_version: str,
                    batch_id: Optional[str] = None, close: bool = True) -> Dict[str, Any]:
        """Reports the rewards of one training step: task id -> the K rewards of its group.

        Idempotent per (step, batch id): reporting the same batch again is answered with
        ``duplicate: True`` and publishes nothing twice. ``close=True`` closes the step.
        """
        groups: List[Dict[str, Any]] = [{"taskId": t, "rewards": [float(r) for r in rs]} for t, rs in rewards.items()]
        body = {"batchId": batch_id or f"step-{step}", "policyVersion": policy_version, "groups": groups, "close": close}
        _, _, answer = self._request("POST", f"/v1/campaigns/{self.campaign}/steps/{int(step)}/rollouts", body)
        return answer

    def fetch_pool(self, wait: float = 0) -> Dict[str, Any]:
        """The active pool ``{"version", "tasks": [...]}``; cached by version (ETag / If-None-Match).

        ``wait`` > 0 long-polls up to that many seconds for a newer version.
        """
        headers = {"If-None-Match": self._etag} if self._etag else {}
        query = f"?wait={int(wait)}" if wait > 0 else ""
        status, resp_headers, body = self._request("GET", f"/v1/campaigns/{self.campaign}/pool{query}", headers=headers,
                                                   timeout=self.timeout + max(0, wait))
        if status == 304 and self._pool is not None:
            return self._pool
        self._pool = body
        self._etag = resp_headers.get("ETag") or resp_headers.get("etag")
        return body

    def fetch_batch(self, n: int, seed: Optional[int] = None) -> Dict[str, Any]:
        """n tasks sampled from the active pool (with replacement; deterministic for a seed).

        ``n`` is capped by the gateway (RODS_GATEWAY_MAX_BATCH_N, default 4096). When the tasks
        would pass its byte cap the answer holds the first ones that fit, with ``truncated: True``
        and ``n`` the count answered: ask again (another seed) for the rest.
        """
        query = f"?n={int(n)}" + (f"&seed={int(seed)}" if seed is not None else "")
        _, _, body = self._request("GET", f"/v1/campaigns/{self.campaign}/batch{query}")
        return body

    def api_version(self) -> str:
        """The API version the gateway serves (its OpenAPI document's info.version)."""
        _, _, body = self._request("GET", "/openapi.json")
        return str(body["info"]["version"])
