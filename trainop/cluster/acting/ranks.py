"""The manager's end of the rank supervisors' channel (supervisor/channel.go): tell a pod's
supervisor the job's attempts, and read where its rank is.

Every request and every answer carries an HMAC-SHA256 of itself under the pod's key, each
part framed by its length, bound to the pod's name and the request's nonce: an answer that
is not the supervisor's (another pod's, a replay, a process that took its port) is refused
here as NotAuthentic, and a request that is not the manager's is refused there.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from typing import Any

import aiohttp
import orjson

from trainop.engine.observed import RankEnd, RankState, Reported, Told

MOST_ATTEMPTS = 2**31 - 1
KEY_BYTES = 32
"""The key's length, as the supervisor holds it to."""
PHASES = frozenset({"running", "stopping", "exited", "held"})
ANSWER_MOST = (64 + 16) << 10
"""The longest answer read: a state with the largest progress report a supervisor passes
on (engine/progress.py's LIMIT)."""
REASONS = frozenset({"OOMKilled"})
"""Why a rank ended, where its supervisor knows (supervisor/child.go)."""


class ChannelError(Exception):
    """The supervisor could not be reached, or did not answer as the protocol says."""


class NotAuthentic(ChannelError):
    """An answer whose MAC is not the supervisor's."""


def encode_key(key: bytes) -> str:
    """A key as the supervisor reads it from TRAINOP_SUPERVISOR_KEY."""
    return base64.urlsafe_b64encode(key).rstrip(b"=").decode()


def new_key() -> str:
    """A fresh key for a job's supervisors (the engine takes it as input: Observed)."""
    return encode_key(secrets.token_bytes(KEY_BYTES))


def mac(key: bytes, *parts: str | bytes) -> bytes:
    """The HMAC-SHA256 of `parts`, each framed by its length in bytes."""
    h = hmac.new(key, digestmod=hashlib.sha256)
    for part in parts:
        raw = part.encode() if isinstance(part, str) else part
        h.update(f"{len(raw)}:".encode() + raw)
    return h.digest()


class Supervisor:
    """One pod's supervisor, at `address` (host:port)."""

    def __init__(self, session: aiohttp.ClientSession, address: str, pod: str,
                 key: bytes) -> None:
        self.session, self.base, self.pod, self.key = session, f"http://{address}", pod, key

    async def tell(self, told: Told) -> RankState:
        """Tell the supervisor the job's attempts; its state after it took them in."""
        body = orjson.dumps({"attempt": told.attempt, "released": told.released,
                             "finish": told.finish})
        return await self._call("POST", "/tell", "", body)

    async def state(self, after: int = 0, wait: float = 0.0) -> RankState:
        """The rank's state once it is newer than `after` (a seq), or after `wait` seconds
        (the supervisor holds the answer at most 30 s)."""
        return await self._call("GET", "/state", f"after={after}&wait={int(wait * 1000)}",
                                b"")

    async def _call(self, method: str, path: str, query: str, body: bytes) -> RankState:
        nonce = secrets.token_hex(16)
        headers = {"X-Trainop-Nonce": nonce, "X-Trainop-Mac": mac(
            self.key, "request", method, path, query, self.pod, nonce, body).hex()}
        url = f"{self.base}{path}" + (f"?{query}" if query else "")
        try:
            async with self.session.request(method, url, data=body or None,
                                            headers=headers) as resp:
                answer = await resp.content.read(ANSWER_MOST)
                if resp.status != 200:
                    raise ChannelError(f"{self.pod}: {resp.status} {answer[:200]!r}")
                got = resp.headers.get("X-Trainop-Mac", "")
        except (aiohttp.ClientError, TimeoutError) as err:
            raise ChannelError(f"{self.pod}: {err}") from err
        want = mac(self.key, "answer", self.pod, nonce, answer)
        if not hmac.compare_digest(got, want.hex()):
            raise NotAuthentic(f"{self.pod}: an answer that is not its supervisor's")
        try:
            doc = orjson.loads(answer)
        except orjson.JSONDecodeError as err:
            raise ChannelError(f"{self.pod}: an answer not in the protocol's shape: {err}"
                               ) from err
        return read_state(doc, self.pod)


def read_state(doc: Any, pod: str) -> RankState:
    """A supervisor's state, read strictly (its MAC checked: still nothing is assumed)."""
    try:
        told, last = doc["told"], doc["last"]
        state = RankState(
            pod=_text(doc["pod"]), seq=_whole(doc["seq"], 2**64 - 1), phase=_text(doc["phase"]),
            attempt=_whole(doc["attempt"]), told=Told(
                _whole(told["attempt"]), _whole(told["released"]), _flag(told["finish"])),
            last=None if last is None else RankEnd(
                _whole(last["code"], 255), _whole(last["signal"], 64) if "signal" in last
                else None, _text(last["at"]), _reason(last["reason"]) if "reason" in last
                else None), report=_report(doc, pod))
    except (KeyError, TypeError, ValueError) as err:
        raise ChannelError(f"{pod}: an answer not in the protocol's shape: {err}") from err
    if state.pod != pod or state.phase not in PHASES:
        raise ChannelError(f"{pod}: an answer of pod {state.pod!r}, phase {state.phase!r}")
    return state


def _report(doc: dict[str, Any], pod: str) -> Reported | None:
    """The rank's progress report the state passes on (read by the engine), or why its
    supervisor could not read one."""
    if "progressProblem" in doc:
        problem = _text(doc["progressProblem"])
        if len(problem) > 200:
            raise ValueError("progressProblem is longer than a supervisor says it")
        return Reported(pod, problem=problem)
    return Reported(pod, doc["progress"]) if "progress" in doc else None


def _whole(value: object, most: int = MOST_ATTEMPTS) -> int:
    if type(value) is not int or not 0 <= value <= most:
        raise ValueError(f"{value!r} is not a whole number up to {most}")
    return value


def _reason(value: object) -> str:
    if value not in REASONS:
        raise ValueError(f"{value!r} is not a reason a supervisor gives")
    return str(value)


def _text(value: object) -> str:
    if type(value) is not str:
        raise ValueError(f"{value!r} is not text")
    return value


def _flag(value: object) -> bool:
    if type(value) is not bool:
        raise ValueError(f"{value!r} is not true or false")
    return value
