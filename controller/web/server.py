"""The page's HTTP server: aiohttp in a thread of its own, beside a synchronous program.

Routes:

* ``GET /``: the page (``static/index.html``); ``/static/...`` its script and style;
  ``/vendor/cytoscape.min.js`` the graph library as ``make setup`` installed it (npm);
* ``GET /api/topology``: the fabric by tier (`controller.web.topology`);
* ``GET /api/state``: the latest live state (`controller.web.state.FabricView.snapshot`);
* ``GET /api/events``: server-sent events, one ``state`` event every ``interval`` seconds (0.5 by
  default), ``retry: 1000`` so a page that lost the server tries again every second;
* ``POST /api/change/<action>``: a change (`controller.web.changes`), with the token.

One task builds the state every ``interval`` (in a worker thread: the reads take locks and
P4Runtime round trips) and hands the same text to every open stream. A state that could not be
built is counted and sent as an ``error`` event naming why; the page shows it. Errors of the
API are JSON objects ``{"error": "..."}`` with a 4xx status.
"""
from __future__ import annotations

import asyncio
import json
import logging
import threading
from pathlib import Path

from aiohttp import web

from controller.web.changes import Changes, ChangeError, apply, check_token, new_token, parse_request
from controller.web.loads import LinkLoads, LinkRates
from controller.web.state import FabricView

log = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
STATIC_DIR = HERE / "static"
VENDOR_FILES = {"cytoscape.min.js": HERE / "node_modules" / "cytoscape" / "dist" / "cytoscape.min.js"}
DEFAULT_INTERVAL = 0.5
MAX_BODY = 4096             # a change request is a few names


class WebServer:
    """Serves ``view`` (and carries out changes with ``changes`` when given) on host:port."""

    def __init__(self, view: FabricView, changes: Changes | None = None, *, host: str = "127.0.0.1", port: int = 0,
                 token: str | None = None, interval: float = DEFAULT_INTERVAL) -> None:
        self.view = view
        self.changes = changes
        self.host, self.port = host, port
        self.token = token or new_token()
        self.interval = interval
        self.state_errors = 0
        self.last_state_error: str | None = None
        self._state_text = "{}"
        self._state_event = "state"
        self._version = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._start_error: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self._bound: tuple[str, int] | None = None

    # --- application -------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY, middlewares=[_json_errors])
        app.router.add_get("/", self._index)
        app.router.add_static("/static/", STATIC_DIR)
        app.router.add_get("/vendor/{name}", self._vendor)
        app.router.add_get("/api/topology", self._topology)
        app.router.add_get("/api/state", self._state)
        app.router.add_get("/api/events", self._events)
        app.router.add_post("/api/change/{action}", self._change)
        return app

    async def _index(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC_DIR / "index.html")

    async def _vendor(self, request: web.Request) -> web.StreamResponse:
        path = VENDOR_FILES.get(request.match_info["name"])
        if path is None:
            raise web.HTTPNotFound(text=f"no vendored file {request.match_info['name']!r}")
        if not path.is_file():
            raise web.HTTPServiceUnavailable(text=f"{path} is missing: run `make setup` (it installs cytoscape.js "
                                                  "with npm into controller/web/node_modules)")
        return web.FileResponse(path)

    async def _topology(self, request: web.Request) -> web.StreamResponse:
        return web.json_response({**self.view.topology(), "changes": self.changes is not None})

    async def _state(self, request: web.Request) -> web.StreamResponse:
        return web.Response(text=self._state_text, content_type="application/json")

    async def _events(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        await resp.write(b"retry: 1000\n\n")
        seen = -1
        assert self._stop is not None
        try:
            while not self._stop.is_set():
                if self._version != seen:
                    seen = self._version
                    await resp.write(f"event: {self._state_event}\ndata: {self._state_text}\n\n".encode())
                await asyncio.sleep(self.interval / 4)
        except ConnectionResetError:        # the page went away (aiohttp's ClientConnectionResetError is one)
            pass
        return resp

    async def _change(self, request: web.Request) -> web.StreamResponse:
        check_token(request.headers.get("Authorization"), self.token)
        if self.changes is None:
            raise ChangeError(403, "this server is read-only: it was started without a way to make changes")
        req = parse_request(request.match_info["action"], await request.read())
        loop = asyncio.get_running_loop()
        try:
            done = await loop.run_in_executor(None, apply, self.changes, req, self.view.fabric)
        except ChangeError:
            raise
        except (KeyError, ValueError) as err:           # the change's own checks (aifabric.lab.failures)
            raise ChangeError(400, str(err).strip("'\"")) from None
        except Exception as err:  # noqa: BLE001 - a switch that did not take it: the server's side
            log.warning("change %s failed: %s", req.action, err)
            return web.json_response({"error": f"{req.action}: {err}"}, status=502)
        log.warning("change %s %s: done", req.action, json.dumps(req.fields))
        return web.json_response({"done": req.action, **done})

    # --- state -------------------------------------------------------------------------------

    async def _publish_loop(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._stop is not None
        while not self._stop.is_set():
            try:
                state = await loop.run_in_executor(None, self.view.snapshot)
                self._state_text, self._state_event = json.dumps(state, separators=(",", ":")), "state"
            except Exception as err:  # noqa: BLE001 - counted, sent to the page and logged
                self.state_errors += 1
                self.last_state_error = f"{type(err).__name__}: {err}"
                self._state_event = "error"
                self._state_text = json.dumps({"error": self.last_state_error, "count": self.state_errors})
                log.warning("page state not built: %s", self.last_state_error)
            self._version += 1
            try:
                await asyncio.wait_for(self._stop.wait(), self.interval)
            except asyncio.TimeoutError:
                pass

    # --- life cycle ----------------------------------------------------------------------------

    def start(self) -> tuple[str, int]:
        """Serve in a thread; returns the bound address. OSError names it when it cannot bind."""
        if self._thread is not None:
            return self.address
        if self.view.loads is not None:
            self.view.loads.start()
        self._thread = threading.Thread(target=self._run, name="web-page", daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if self._start_error is not None:
            if self.view.loads is not None:
                self.view.loads.stop()
            self._thread.join(5)
            self._thread = None
            err = self._start_error
            if isinstance(err, OSError):
                raise OSError(err.errno, f"the page cannot listen on {self.host}:{self.port}: {err.strerror}") from None
            raise err
        return self.address

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        finally:
            loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        runner = web.AppRunner(self.app(), access_log=None)
        try:
            await runner.setup()
            site = web.TCPSite(runner, self.host, self.port)
            await site.start()
            sock = site._server.sockets[0]      # type: ignore[union-attr]
            self._bound = sock.getsockname()[:2]
        except BaseException as err:  # noqa: BLE001 - handed to start()'s caller
            self._start_error = err
            self._ready.set()
            await runner.cleanup()
            return
        publisher = asyncio.create_task(self._publish_loop())
        self._ready.set()
        await self._stop.wait()
        await publisher
        await runner.cleanup()

    @property
    def address(self) -> tuple[str, int]:
        if self._bound is None:
            raise RuntimeError("the page server is not serving (call start)")
        return str(self._bound[0]), int(self._bound[1])

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{'[' + host + ']' if ':' in host else host}:{port}/"

    def stop(self) -> None:
        if self._thread is None or self._loop is None or self._stop is None:
            return
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        self._thread = None
        if self.view.loads is not None:
            self.view.loads.stop()

    def announce(self) -> str:
        """The lines to print at start: where the page is and the token for changes."""
        lines = [f"live page on {self.url}"]
        if self.changes is not None:
            lines.append(f"  changes need the token {self.token} (or open {self.url}#token={self.token})")
        return "\n".join(lines)


def page_for(controller, *, host: str = "127.0.0.1", port: int = 0, int_collector=None,
             changes: Changes | None = None, rates: LinkRates | None = None,
             injected=None, interval: float = DEFAULT_INTERVAL, classes=None) -> WebServer:
    """A page server (not started) for a `FabricController`: its port counters read for the
    links' loads, ``int_collector`` for queues and paths, ``changes`` to carry changes out,
    ``classes`` (a `controller.lossless.ClassPoller`) for the links PFC holds paused."""
    fabric = controller.fabric
    loads = LinkLoads(controller.read_port_counters, {sw.name: fabric.ports_of(sw.name) for sw in fabric.switches},
                      rates)
    view = FabricView(controller, int_collector=int_collector, loads=loads,
                      injected=injected or (changes.injected if changes is not None else None), classes=classes)
    return WebServer(view, changes, host=host, port=port, interval=interval)


@web.middleware
async def _json_errors(request: web.Request, handler):
    """A refused change, or any HTTP error under /api/, as {"error": ...} with its status."""
    try:
        return await handler(request)
    except ChangeError as err:
        return web.json_response({"error": err.message}, status=err.status)
    except web.HTTPException as err:
        if not request.path.startswith("/api/") or err.status < 400:
            raise
        text = err.text or err.reason
        if err.status == 405:
            text = f"{request.method} {request.path}: method not allowed (changes are POST, reads GET)"
        elif err.status == 413:
            text = f"body larger than {MAX_BODY} bytes"
        elif err.status == 404:
            text = f"{request.path}: no such API path"
        return web.json_response({"error": text}, status=err.status)
