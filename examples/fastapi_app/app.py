"""A FastAPI application that pushes jobs with the asyncio client and serves rfetch's web UI.

Install what it needs (``pip install 'rfetch[fastapi]'``: FastAPI, uvicorn, a2wsgi and the
web UI's extra), then run it (the factory reads ``REDIS_URL`` when the server starts, not at
import)::

    uvicorn --factory examples.fastapi_app.app:create
    rfetch worker -r examples.fastapi_app.jobs -q mail

then ``curl -X POST localhost:8000/signups -H 'content-type: application/json'
-d '{"user_id": 42, "email": "ann@example.com"}'`` and open http://localhost:8000/rfetch/.
"""

from __future__ import annotations

from a2wsgi import WSGIMiddleware
from fastapi import FastAPI
from pydantic import BaseModel

import rfetch
from examples.fastapi_app.jobs import SendWelcome
from rfetch.web import create_app


class Signup(BaseModel):
    user_id: int
    email: str


def create(config: rfetch.Config | None = None, client: rfetch.Client | None = None) -> FastAPI:
    """The application, with the web UI under ``/rfetch``.

    Args:
        config: Redis URL and namespace (default: ``Config.from_env()``).
        client: the client to push through (default: one of ``config``). In tests the
            ``rfetch_fake`` fixture intercepts either; a client with a sink of its own,
            ``rfetch.Client(config, sink=rfetch.testing.FakeQueues(config))``, works too.
    """
    config = config if config is not None else rfetch.Config.from_env()
    client = client if client is not None else rfetch.Client(config)
    app = FastAPI(title="signups")

    @app.post("/signups")
    async def signup(body: Signup) -> dict[str, str | None]:
        # The asyncio client: the push awaits Redis (redis.asyncio) on the app's loop.
        jid = await SendWelcome.set(client=client).aperform_async(body.user_id, body.email)
        return {"jid": jid}

    # The web UI is a WSGI app; a2wsgi serves it under the mount (its root_path becomes
    # SCRIPT_NAME, so every link stays under /rfetch). Protect it as the rest of your
    # application (a dependency, a proxy, or create_app's auth hook).
    ui = create_app(config, basic_auth=False)
    app.mount("/rfetch", WSGIMiddleware(ui))  # type: ignore[arg-type]
    return app
