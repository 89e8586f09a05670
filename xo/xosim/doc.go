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
// inject faults (latency, error statuses, connection resets, truncated streams, stalled event
// streams, bodies trickled a byte at a time, listings repeating every object) and read request
// counters. A Server is an http.Handler: serve it with
// net/http/httptest or any http.Server.
package xosim
