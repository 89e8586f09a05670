// Package xosim is an in-memory simulator of the Xen Orchestra REST API (/rest/v0) for tests,
// benchmarks and demos.
//
// It reproduces what XO's own REST API package (@xen-orchestra/rest-api 0.39.0) answers, as
// ../../shared/reference/xo-rest-api.md describes it: cookie (and HTTP Basic) authentication with
// XO's 400/401 bodies, the vms, hosts, pools and servers collections with fields (lodash paths),
// filter (XO's complex-matcher syntax, parsed the way XO parses it), limit, ndjson and markdown,
// single-object reads with XO's "no such VM" 404, tag endpoints, /ping, and the server-sent event
// stream with its subscriptions.
//
// Tests drive it through a control API (AddVMs, SetPowerState, Migrate, DisconnectPool, ...),
// which also steps through XO's connection stages as a messy estate shows them: a reconnecting
// pool's server is "connected" before its pool and hosts load, and its VMs arrive after them
// (BeginReconnect, RevealPool, RevealVMs, ReconnectInStages); a pool being lost drops its VMs,
// then its hosts, then itself, and its server turns "disconnected" last (BeginDisconnect,
// FinishDisconnect); a disabled server entry shows "enabled": false and its pool disconnected
// (SetServerEnabled, PoolSpec.ServerDisabled). Objects have the ids their specs give, so two
// simulators built from the same specs or inventory file serve the same pools, as two XO
// instances connected to them do. The control API also injects faults (latency, error
// statuses, connection resets, truncated streams, stalled event streams, bodies trickled a byte
// at a time, listings repeating every object) and reads request counters. A Server is an
// http.Handler: serve it with net/http/httptest or any http.Server. It lists 100,000 VMs with
// the controller's fields as ndjson in well under a second (BenchmarkList100kVMs).
package xosim
