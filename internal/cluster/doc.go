// Package cluster holds the test of stategate's replicas: three real
// `stategate serve` processes (the built binary) on one throwaway
// PostgreSQL (internal/pgtest), behind a proxy in the test
// (internal/mcpproxy), driven by MCP clients, with real signals: handles
// driven through any replica, contention on one instance, a replica killed
// mid-load, the database restarted mid-load, timers of a killed replica,
// list_changed across replicas, and a fresh replica after all stopped. It
// skips where PostgreSQL is not installed (fails under
// STATEGATE_REQUIRE_POSTGRES). It has no code of its own.
package cluster
