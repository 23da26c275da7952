"""One spelling of a model server's URL (:func:`normalise_url`), which names the server in cache
keys and model identities, and whether a server is this machine (:func:`is_loopback`)."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def normalise_url(url: str) -> str:
    """One spelling of a server's URL: scheme and host in lower case, no user name or password, no
    default port (80, 443), no trailing ``/``, no fragment. ``http://LocalHost:80/v1/`` and
    ``http://localhost/v1`` are one server; ``localhost`` and ``127.0.0.1`` are two spellings
    cooplab does not resolve, so two servers."""
    parts = urlsplit(url.strip())
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:  # not a port number: the connection will fail; the text stays as given
        return url.strip()
    host = f"[{host}]" if ":" in host else host
    netloc = host if port is None or port == {"http": 80, "https": 443}.get(scheme) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, ""))


def is_loopback(url: str | None) -> bool:
    """Whether ``url`` names this machine (``localhost``, ``::1``, ``127.*``): loopback servers are
    reached directly, never through an HTTP proxy from the environment."""
    if not url:
        return False
    host = (urlsplit(url).hostname or "").lower()
    return host in ("localhost", "::1") or host.startswith("127.")
