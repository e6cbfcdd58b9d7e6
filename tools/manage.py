"""``once manage ACTION ... [--router http://USER:PASSWORD@HOST:PORT]``: a management write
to a running router (``router/http/manage.py``), as its admin (a user of its users file in
group ``admin``), like ``qdmanage``; or over AMQP, ``--router amqp://USER:PASSWORD@HOST:PORT``
(or ``amqps://``), to its ``$management`` node:

  once manage close-connection ID            # /api/connections' id: the client reconnects
  once manage detach-link ID LINK            # one link of that connection, suspended
  once manage drop-subscriber CONTAINER LINK # a suspended subscriber, given up now
  once manage reload                         # what SIGHUP takes up
  once manage drain                          # no new clients, the rest moved away; it stops
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlencode, urlsplit

from .exits import CommandError, Exit
from .stat_view import check_base, request_for

ACTIONS = {"close-connection": ("/api/connections/close", ("id",)),
           "detach-link": ("/api/links/detach", ("connection", "name")),
           "drop-subscriber": ("/api/subscribers/drop", ("container", "name")),
           "reload": ("/api/reload", ()), "drain": ("/api/drain", ())}


def post(base: str, path: str, query: dict[str, str], timeout: float) -> Any:
    parts = urlsplit(base)
    netloc = parts.netloc.rpartition("@")[2]
    request = request_for(base, path, urlencode(query), b"")
    url = request.full_url
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        try:
            said = json.loads(e.read()).get("error", "")
        except (ValueError, AttributeError):
            said = ""
        if e.code == 401:
            raise CommandError(Exit.REFUSED, f"{parts.scheme}://{netloc}: {said or 'needs an admin'}: --router "
                                             "http://USER:PASSWORD@HOST:PORT") from None
        code = Exit.REFUSED if e.code == 403 else Exit.USAGE if e.code in (400, 404, 409) else Exit.FAILED
        raise CommandError(code, f"{parts.scheme}://{netloc}{path}: {said or f'HTTP {e.code}'}") from None
    except TimeoutError:
        raise CommandError(Exit.TIMEOUT, f"{url} did not answer within {timeout:g} s") from None
    except urllib.error.URLError as e:
        reason = e.reason.strerror if isinstance(e.reason, OSError) and e.reason.strerror else e.reason
        raise CommandError(Exit.UNREACHABLE, f"cannot reach {parts.scheme}://{netloc}: {reason} (is the router's "
                                             "http endpoint on?)") from None


def manage(router: str, action: str, args: list[str], timeout: float, tls: Any = None) -> int:
    if action not in ACTIONS:
        raise CommandError(Exit.USAGE, f"unknown action {action!r} ({', '.join(ACTIONS)})")
    path, names = ACTIONS[action]
    if len(args) != len(names):
        raise CommandError(Exit.USAGE, f"{action} takes {' '.join(n.upper() for n in names) or 'nothing'}"
                                       f" (got {' '.join(args) or 'nothing'})")
    if router.startswith(("amqp://", "amqps://")):  # (its ``$management`` node: ``amqp_management.py``)
        from .amqp_management import ManagementClient

        client = ManagementClient(router, timeout, tls)
        try:
            said = client.write(action, args)
        finally:
            client.close()
        print(json.dumps(said if said is not None else {ACTIONS[action][0].rsplit("/", 1)[1]: True}))
        return Exit.OK
    base = check_base(router)  # (its credentials kept: the netloc)
    said = post(base, path, dict(zip(names, args, strict=True)), timeout)
    print(json.dumps(said))
    return Exit.OK
