// Package apiv1 holds the JSON shapes of the public API (/v1): the API's
// own view types, one file per resource family, each with one function
// that maps a replicated record (internal/raftstore, internal/cluster,
// internal/preview) to its view.
//
// Why a package of its own: the records are what raft replicates and
// snapshots, and they change with the cluster's needs; the JSON is what
// clients and the CLI read, and changes only when the API does. Keeping
// the two apart means a renamed or reshaped record changes one mapping
// function here, never the wire format (shape_test.go holds the shapes
// fixed; records_test.go checks that no view embeds a record type).
// The CLI (cmd/reconciler) decodes the same types, so its reading of an
// answer cannot drift from what the server writes.
package apiv1
