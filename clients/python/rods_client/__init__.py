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

A trainer that saves checkpoints also reports each one (``post_checkpoint``; the adapters do it
through ``rods_client.reporting.StepReporter.checkpoint``), so rods records what each checkpoint
was trained on.

Trainer adapters (each imports its framework only if it is installed):

* ``rods_client.hf``: a ``transformers``/TRL ``TrainerCallback``, a pool dataset and a reward
  function wrapper that records the rewards the callback reports at each step's end.
* ``rods_client.verl``: a verl curriculum sampler (``AbstractCurriculumSampler``).
* ``rods_client.slime``: a slime ``DataSource`` and a reward post-process hook.

``__version__`` is the gateway API version this client speaks (``GET /openapi.json`` info.version).

Over HTTPS the gateway's certificate is checked against the CA bundle in ``RODS_CA_BUNDLE``, else
``SSL_CERT_FILE`` or ``REQUESTS_CA_BUNDLE``, else the system's CAs (``ca_bundle=`` overrides them);
a gateway that asks for a client certificate gets ``RODS_CLIENT_CERT`` / ``RODS_CLIENT_KEY``. The
bearer token is never sent over plain ``http://`` to a host beyond loopback unless
``RODS_ALLOW_INSECURE_HTTP=1`` (or ``allow_insecure_http=True``) says so.
"""

from __future__ import annotations

import email.utils
import ipaddress
import json
import logging
import os
import random
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Mapping, Optional, Sequence

__all__ = ["RodsClient", "RodsError", "__version__", "is_retryable", "ca_bundle_from_env", "is_loopback_host"]

log = logging.getLogger("rods_client")

# The gateway API version (entry/gateway/api-version.ts); pyproject.toml reads it as the package version.
__version__ = "1.1.0"


class RodsError(Exception):
    """An error answer of the gateway (RFC 9457 problem+json) or a transport failure (status 0).

    ``retry_after`` is the wait in seconds the gateway asked for (its Retry-After header), if any.
    """

    def __init__(self, status: int, problem: Dict[str, Any], retry_after: Optional[float] = None):
        self.status = status
        self.problem = problem
        self.retry_after = retry_after
        detail = problem.get("detail") or problem.get("title") or "request failed"
        fields = "; ".join(f"{e.get('field')}: {e.get('message')}" for e in problem.get("errors", []) or [])
        super().__init__(f"{status} {detail}" + (f" ({fields})" if fields else ""))


# Answers worth the same request again: the gateway unreachable or timed out (0), rate-limited
# (429, with Retry-After), its dependencies restarting (503 "retry the same request", with
# Retry-After), a proxy in front of it failing (502, 504).
RETRYABLE_STATUSES = frozenset({0, 408, 429, 502, 503, 504})


def is_retryable(error: BaseException) -> bool:
    return isinstance(error, RodsError) and error.status in RETRYABLE_STATUSES


def _retry_after(value: Optional[str]) -> Optional[float]:
    """Retry-After as seconds: delta-seconds or an HTTP date (RFC 9110 10.2.3)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def backoff_delay(attempt: int, base: float, cap: float, retry_after: Optional[float] = None) -> float:
    """Exponential backoff with full jitter in its upper half; never shorter than Retry-After."""
    exp = min(cap, base * (2 ** max(0, attempt - 1)))
    delay = exp / 2 + random.random() * exp / 2
    if retry_after is not None:
        delay = max(delay, min(retry_after, cap))
    return delay


# Where the CA bundle that checks the gateway's certificate comes from, first set first.
CA_BUNDLE_VARIABLES = ("RODS_CA_BUNDLE", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
_TRUE = ("1", "true", "yes", "on")


def ca_bundle_from_env(env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The CA bundle named by RODS_CA_BUNDLE, else SSL_CERT_FILE, else REQUESTS_CA_BUNDLE (None: the system's)."""
    env = os.environ if env is None else env
    for name in CA_BUNDLE_VARIABLES:
        if env.get(name):
            return env[name]
    return None


def is_loopback_host(host: Optional[str]) -> bool:
    """127.0.0.0/8, ::1 (also as ::ffff:127.x.y.z) or ``localhost``."""
    if not host:
        return False
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def _tls_context(ca_bundle: Optional[str], client_cert: Optional[str],
                 client_key: Optional[str]) -> Optional[ssl.SSLContext]:
    """The TLS context of the client's requests: urllib's own default when nothing is configured."""
    if not ca_bundle and not client_cert:
        return None
    if ca_bundle and not os.path.exists(ca_bundle):
        raise ValueError(f"rods: the CA bundle {ca_bundle} does not exist (ca_bundle=, or one of "
                         f"{', '.join(CA_BUNDLE_VARIABLES)})")
    if not ca_bundle:
        context = ssl.create_default_context()
    elif os.path.isdir(ca_bundle):
        context = ssl.create_default_context(capath=ca_bundle)  # a c_rehash'ed folder, as requests takes it
    else:
        context = ssl.create_default_context(cafile=ca_bundle)
    if client_cert:
        context.load_cert_chain(client_cert, client_key or None)
    return context


class RodsClient:
    """The gateway's /v1 API for one campaign.

    Requests that the gateway may answer "retry" (unreachable, 429, 502-504) are retried up to
    ``retries`` times with exponential backoff from ``backoff`` seconds up to ``max_backoff``,
    never sooner than the Retry-After the gateway asked for. Every request is idempotent (a
    report is keyed by its step and batch id), so a retry never counts twice.

    TLS: ``ca_bundle`` (a PEM file or a hashed folder of CAs; default ``ca_bundle_from_env()``)
    checks an ``https://`` gateway's certificate; ``client_cert`` and ``client_key`` (default
    RODS_CLIENT_CERT, RODS_CLIENT_KEY) answer a gateway that asks for a client certificate. A plain
    ``http://`` URL to a host beyond loopback is refused (ValueError) unless ``allow_insecure_http``
    (default: RODS_ALLOW_INSECURE_HTTP=1), so the bearer token never crosses a network in clear.
    """

    def __init__(self, base_url: str, token: str, campaign: str, timeout: float = 30.0, retries: int = 4,
                 backoff: float = 0.5, max_backoff: float = 30.0, ca_bundle: Optional[str] = None,
                 allow_insecure_http: Optional[bool] = None, client_cert: Optional[str] = None,
                 client_key: Optional[str] = None):
        self.base_url = base_url.rstrip("/")
        url = urllib.parse.urlsplit(self.base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"rods: the gateway URL must be http(s)://host[:port], got {base_url!r}")
        if allow_insecure_http is None:
            allow_insecure_http = os.environ.get("RODS_ALLOW_INSECURE_HTTP", "").strip().lower() in _TRUE
        if url.scheme == "http" and not is_loopback_host(url.hostname) and not allow_insecure_http:
            raise ValueError(f"rods: refusing to send the bearer token over plain http:// to {url.hostname} (not "
                             "loopback): use an https:// gateway URL (RODS_CA_BUNDLE names its CA), or set "
                             "RODS_ALLOW_INSECURE_HTTP=1 (allow_insecure_http=True) on a network you trust")
        self._tls = _tls_context(ca_bundle or ca_bundle_from_env(), client_cert or os.environ.get("RODS_CLIENT_CERT"),
                                 client_key or os.environ.get("RODS_CLIENT_KEY"))
        self.token = token
        self.campaign = campaign
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.retried = 0
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
                 timeout: Optional[float] = None, retries: Optional[int] = None):
        attempts = (self.retries if retries is None else retries) + 1
        for attempt in range(1, attempts + 1):
            try:
                return self._request_once(method, path, body, headers, timeout)
            except RodsError as e:
                if attempt >= attempts or not is_retryable(e):
                    raise
                delay = backoff_delay(attempt, self.backoff, self.max_backoff, e.retry_after)
                self.retried += 1
                log.warning("rods: %s %s: %s; retrying in %.1f s (attempt %d of %d)", method, path, e, delay,
                            attempt + 1, attempts)
                time.sleep(delay)
        raise AssertionError("unreachable")

    def _request_once(self, method: str, path: str, body: Any = None, headers: Optional[Mapping[str, str]] = None,
                      timeout: Optional[float] = None):
        data = None if body is None else json.dumps(body, allow_nan=False).encode("utf-8")
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        # Unredirected: a redirect (to another host, or to plain http) never carries the token.
        req.add_unredirected_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout, context=self._tls) as resp:
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
            raise RodsError(e.code, problem, _retry_after(e.headers.get("Retry-After"))) from None
        except urllib.error.URLError as e:
            raise RodsError(0, {"title": f"gateway unreachable: {e.reason}"}) from None
        except (OSError, ValueError) as e:  # a timeout, a reset connection, a truncated answer
            raise RodsError(0, {"title": f"gateway unreachable: {e}"}) from None

    @staticmethod
    def step_body(step: int, rewards: Mapping[str, Sequence[float]], policy_version: str,
                  batch_id: Optional[str] = None, close: bool = True) -> Dict[str, Any]:
        """The body of a step's report (what ``report_step`` posts, and what a spool keeps)."""
        groups: List[Dict[str, Any]] = [{"taskId": t, "rewards": [float(r) for r in rs]} for t, rs in rewards.items()]
        return {"batchId": batch_id or f"step-{int(step)}", "policyVersion": policy_version, "groups": groups,
                "close": close}

    def post_step(self, step: int, body: Mapping[str, Any], retries: Optional[int] = None) -> Dict[str, Any]:
        _, _, answer = self._request("POST", f"/v1/campaigns/{self.campaign}/steps/{int(step)}/rollouts", body,
                                     retries=retries)
        return answer

    @staticmethod
    def checkpoint_body(checkpoint_id: str, run_id: str, step: int, resumed_from: Optional[str] = None,
                        digest: Optional[str] = None,
                        retrained_steps: Sequence[Mapping[str, Any]] = ()) -> Dict[str, Any]:
        """The body of a checkpoint's report (what ``post_checkpoint`` posts, and what a spool keeps)."""
        return {"checkpointId": checkpoint_id, "runId": run_id, "step": int(step), "resumedFrom": resumed_from,
                "digest": digest, "retrainedSteps": [dict(r) for r in retrained_steps]}

    def post_checkpoint(self, body: Mapping[str, Any], retries: Optional[int] = None) -> Dict[str, Any]:
        """Records a checkpoint: ``{"checkpointId", "manifestRoot", "tasks", "groups", "duplicate"}``.

        The same body again is answered ``duplicate: True``; another body under a recorded id is a
        409 (checkpoint-conflict). A 503 (checkpoint-ahead, with Retry-After) means the campaign
        has not closed every step up to ``step`` yet: the same request later succeeds.
        """
        _, _, answer = self._request("POST", f"/v1/campaigns/{self.campaign}/checkpoints", body, retries=retries)
        return answer

    def report_step(self, step: int, rewards: Mapping[str, Sequence[float]], policy_version: str,
                    batch_id: Optional[str] = None, close: bool = True) -> Dict[str, Any]:
        """Reports the rewards of one training step now: task id -> the K rewards of its group.

        Idempotent per (step, batch id): reporting the same batch again is answered with
        ``duplicate: True`` and publishes nothing twice. ``close=True`` closes the step; a step with
        no group (``rewards`` empty) is closed all the same. Retried as the client is configured;
        a trainer that must not block or stop on an outage reports through
        ``rods_client.reporting.StepReporter`` instead.
        """
        return self.post_step(step, self.step_body(step, rewards, policy_version, batch_id, close))

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
