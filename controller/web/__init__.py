"""A live page of the fabric, served by the controller (``aifabric up --web``, ``aifabric
controller --web``): the topology by tier, each link direction coloured by its load, hot ports'
queue depths from INT, failures as failure handling sees them, the load-balancing mode per
switch, TE pins as paths, AllReduce jobs with their trees and progress, and a watched flow's INT
path; pushed to the page by server-sent events; changes only with the token printed at start.

Modules, each owning one thing:

* `topology` - the fabric drawn by tier (nodes, positions, link directions): what never changes;
* `loads`    - `LinkLoads`: each link direction's rate from the switches' port counters, against
  the link's rate;
* `jobs`     - `JobWatch`: AllReduce jobs seen on the controller, their trees and the chunks their
  root switch completed;
* `state`    - `FabricView`: the live state as one JSON document (built from the features the
  controller runs; none is required);
* `changes`  - the change requests (fail/restore a link, a load-balancing mode): parsing, the
  token, and `Changes`, what a server may be given to carry them out;
* `server`   - `WebServer`: the aiohttp application (page, state, event stream, changes) in a
  thread of its own.

The page itself is ``static/`` (HTML, JavaScript, CSS); its graph library, cytoscape.js, is
installed by ``make setup`` with npm into ``controller/web/node_modules`` (package.json here).
The package stands, like `controller.metrics`, above the controller's core and its features:
neither imports it.
"""
