"""Plain-JSON access to the Kubernetes REST API through the official client's ``ApiClient``.

The controllers handle Pods, Services and Ray custom resources alike as dicts: Pod templates carry
arbitrary fields that must reach the API server untouched, which the typed models would re-shape.
The ``ApiClient`` still supplies authentication, TLS and connection pooling, so every request looks
like one from any other client of the official library.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from kubernetes.client import ApiClient

from .objects import Obj, meta

DEFAULT_TIMEOUT = (5.0, 30.0)


@dataclass(frozen=True)
class Resource:
    """One REST resource (``group`` empty for the core group)."""

    group: str
    version: str
    plural: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name:
            base += f"/{quote(name, safe='')}"
        if subresource:
            base += f"/{subresource}"
        return base

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


class ApiError(Exception):
    """A non-2xx answer from the API server, carrying its ``Status`` reason and message."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @staticmethod
    def from_status(code: int, status_obj: Obj | None, fallback: str = "") -> ApiError:
        obj = status_obj or {}
        reason = str(obj.get("reason") or "")
        message = str(obj.get("message") or fallback)
        cls: type[ApiError] = ApiError
        if code == 409:
            cls = AlreadyExists if reason == "AlreadyExists" else Conflict
        else:
            cls = _ERRORS_BY_CODE.get(code, ApiError)
        return cls(code, reason, message)


class NotFound(ApiError):
    pass


class Conflict(ApiError):
    """409 on a resourceVersion precondition: the object changed since it was read."""


class AlreadyExists(ApiError):
    pass


class Gone(ApiError):
    """410: the watch's resourceVersion is too old; the caller must list again."""


class Invalid(ApiError):
    """422: the object was rejected by validation; retrying the same request cannot help."""


class Unauthorized(ApiError):
    pass


class Forbidden(ApiError):
    pass


_ERRORS_BY_CODE: dict[int, type[ApiError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    410: Gone,
    422: Invalid,
}


def _decode_error(status: int, data: bytes) -> ApiError:
    try:
        obj = json.loads(data)
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        return ApiError.from_status(status, None, data[:200].decode("utf-8", "replace"))
    return ApiError.from_status(status, obj)


class WatchStream:
    """One open watch request; iterate for events, ``interrupt()`` from another thread to end it.

    Interrupting shuts the socket down so a thread blocked reading it returns at once, which is
    what lets the operator stop within a fraction of a second even with a long server timeout.
    """

    def __init__(self, response: Any) -> None:
        self._response = response

    def __iter__(self) -> Iterator[Obj]:
        buffer = b""
        for chunk in self._response.stream(amt=None, decode_content=False):
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if line.strip():
                    yield json.loads(line)

    def interrupt(self) -> None:
        try:
            self._response.shutdown()
        except (AttributeError, OSError):
            sock = getattr(getattr(self._response, "connection", None), "sock", None)
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._response.close()
        self._response.release_conn()


class KubeClient:
    """Thread-safe: the underlying urllib3 pool is shared by all controllers and informers."""

    def __init__(
        self, api_client: ApiClient, timeout: tuple[float, float] = DEFAULT_TIMEOUT
    ) -> None:
        self.api_client = api_client
        self.timeout = timeout

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: tuple[float, float] | None = None,
    ) -> Any:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        method, url, headers, body, post = self.api_client.param_serialize(
            method=method,
            resource_path=path,
            query_params=query or [],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        rest = self.api_client.call_api(
            method,
            url,
            header_params=headers,
            body=body,
            post_params=post,
            _request_timeout=timeout or self.timeout,
        )
        return rest.response

    def request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: tuple[float, float] | None = None,
    ) -> Obj:
        response = self._send(
            method, path, query=query, body=body, content_type=content_type, timeout=timeout
        )
        try:
            data = response.data
        finally:
            response.release_conn()
        if not 200 <= response.status <= 299:
            raise _decode_error(response.status, data)
        return json.loads(data) if data else {}

    def server_version(self, timeout: tuple[float, float] = (3.0, 5.0)) -> Obj:
        return self.request("GET", "/version", timeout=timeout)

    def get(self, res: Resource, namespace: str | None, name: str) -> Obj:
        return self.request("GET", res.path(namespace, name))

    def list(
        self, res: Resource, namespace: str | None = None, label_selector: str | None = None
    ) -> tuple[list[Obj], str]:
        """Items (with apiVersion/kind filled in, as watch events have them) and the list's RV."""
        query = [("labelSelector", label_selector)] if label_selector else []
        body = self.request("GET", res.path(namespace), query=query)
        items = body.get("items") or []
        for item in items:
            item.setdefault("apiVersion", res.api_version)
            item.setdefault("kind", res.kind)
        return items, str(meta(body).get("resourceVersion") or "")

    def watch(
        self, res: Resource, namespace: str | None, resource_version: str, timeout_seconds: int
    ) -> WatchStream:
        query: list[tuple[str, Any]] = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        if resource_version:
            query.append(("resourceVersion", resource_version))
        response = self._send(
            "GET",
            res.path(namespace),
            query=query,
            timeout=(self.timeout[0], timeout_seconds + 5.0),
        )
        if not 200 <= response.status <= 299:
            try:
                data = response.data
            finally:
                response.release_conn()
            raise _decode_error(response.status, data)
        return WatchStream(response)

    def create(self, res: Resource, namespace: str | None, body: Obj) -> Obj:
        return self.request("POST", res.path(namespace), body=body)

    def replace(
        self, res: Resource, namespace: str | None, name: str, body: Obj
    ) -> Obj:
        return self.request("PUT", res.path(namespace, name), body=body)

    def replace_status(
        self, res: Resource, namespace: str | None, name: str, body: Obj
    ) -> Obj:
        return self.request("PUT", res.path(namespace, name, "status"), body=body)

    def patch(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        body: Obj,
        content_type: str = "application/strategic-merge-patch+json",
    ) -> Obj:
        return self.request(
            "PATCH", res.path(namespace, name), body=body, content_type=content_type
        )

    def delete(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        propagation_policy: str | None = None,
    ) -> Obj:
        body = {"propagationPolicy": propagation_policy} if propagation_policy else None
        return self.request("DELETE", res.path(namespace, name), body=body)


def describe_error(exc: BaseException) -> str:
    """One line for an error, unwrapping urllib3's MaxRetryError to the cause that matters."""
    reason = getattr(exc, "reason", None)
    if isinstance(reason, BaseException):
        return f"{type(reason).__name__}: {reason}"
    return f"{type(exc).__name__}: {exc}"
