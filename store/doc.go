// Package store is the context store of record (contract: seed 002, "Context store contract").
//
// It owns everything under the context root ($SMARTER_COMPACT_STATE_DIR/context): the path rules
// (Dir, SanitizeSID), the per-session SQLite databases (schema v3 and its migrations, rows and
// lines, the fingerprint index, events), content-addressed blobs, session registrations, the
// .force flag, the proxy's opaque trim state, the retention sweep, and doctor's checks of the
// store folder and of the SQLite build (doctor.go: CheckDir, CheckFTS5). It also owns the row
// fingerprint and the canonical JSON it hashes (DESIGN.md §6), because the database key depends
// on them byte for byte.
//
// It must not import any other package of this module, and it knows nothing about model-API
// formats: callers hand it rows, events and bytes already shaped by the contract. The proxy,
// mcp, web and app packages may import it.
//
// Filling the vectors table over HTTP is store/embedding's; the test helpers its callers share
// (a root in a temp dir, seeded sessions) are store/storetest's.
//
// The package needs cgo and the SQLite FTS5 module: build and test with -tags sqlite_fts5.
// Open fails with an error naming the tag when FTS5 is missing.
package store
