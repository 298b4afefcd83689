"""OpenAI-style API errors: one exception type that every handler raises, one JSON shape clients get.

Clients (``openai``, Locust users, benchmark tools) parse ``{"error": {"message", "type", "param",
"code"}}``; ``param`` names the offending request field so a caller can fix its input without reading
server logs.
"""

from __future__ import annotations

from http import HTTPStatus


class APIError(Exception):
    """An error answered to the client with ``status`` and the OpenAI error body.

    ``param`` is the request field at fault (``None`` when no single field is), ``headers`` extra
    response headers (e.g. ``Retry-After`` when shedding load).
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        error_type: str | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status = int(status)
        self.message = message
        self.param = param
        self.error_type = error_type or _default_type(self.status)
        self.headers = headers or {}

    def body(self) -> dict:
        return {
            "error": {
                "message": self.message,
                "type": self.error_type,
                "param": self.param,
                "code": self.status,
            }
        }


def invalid_request(message: str, param: str | None) -> APIError:
    """A 400 ``invalid_request_error`` naming ``param``."""
    return APIError(HTTPStatus.BAD_REQUEST, message, param=param)


def _default_type(status: int) -> str:
    if status == HTTPStatus.BAD_REQUEST or status == HTTPStatus.REQUEST_ENTITY_TOO_LARGE:
        return "invalid_request_error"
    if status == HTTPStatus.NOT_FOUND:
        return "not_found_error"
    if status == HTTPStatus.TOO_MANY_REQUESTS:
        return "rate_limit_error"
    if status == HTTPStatus.SERVICE_UNAVAILABLE:
        return "service_unavailable_error"
    return "internal_server_error"
